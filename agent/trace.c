/*
 * trace.c - spans, segments and the current request of a thread (see trace.h).
 *
 * Rules: everything except sw_trace_init, sw_trace_after_fork and the once-only ring creation
 * runs on application threads: no malloc, no locks, no stdio, no blocking, no syscall (the
 * clock is the vDSO). errno is preserved by the callers; the slow paths here (ring creation,
 * reporter spawn) also save and restore it themselves.
 *
 * Pools. sw_trace_init maps two fixed pools once: SEG_SLOTS open segments and SPAN_SLOTS open
 * spans. A slot is claimed by setting its bit in an atomic bitmap (CAS, lock-free, no ABA: a
 * bit is set or clear, nothing else) and freed by clearing it. A segment slot carries a fixed
 * ARENA_BYTES arena: every span that FINISHES is serialised right away, in record.h span
 * format, into that arena, so an open segment never holds more than its arena, and the final
 * record is the record.h header plus one memcpy of the arena. An open span slot holds only
 * what is needed until it finishes (names, peer, url, method, start time, parent, segment).
 * The pools are one MAP_NORESERVE anonymous mapping of about 28 MiB of address space (1024 x
 * ~18.2 KiB segments, 4096 x ~2.5 KiB spans); only the pages of slots actually used become
 * resident, and the bitmap hands out low slots first, so a process with a few concurrent
 * requests touches a few hundred KiB. A request that stays open for a long time (a streamed
 * response) holds its slots that long: 1024 such requests at once exhaust the segment pool,
 * and further requests are dropped and counted until some finish.
 *
 * Handles. A span handle is `generation << 32 | slot`; the generation is bumped on every claim
 * and is never 0, so a handle is never 0 and 0 means "not traced". The small "hot" array
 * span_hot[slot].state holds the handle while the span is open and 0 otherwise: finishing a
 * span CASes state from the handle to 0, so of two finishers (or a finisher holding a stale
 * handle of a reused slot) exactly one, the rightful one, proceeds; the others do nothing.
 *
 * Concurrency inside a segment. seg_live[slot] is one 64-bit word `generation << 32 | open
 * spans`. The root span holds one count; an exit joining the segment (from any thread) takes
 * one with a CAS that also checks the generation and that the count is not 0 (a segment whose
 * count reached 0 is completing and can never be joined again). Span ids come from an atomic
 * counter of the segment (the root takes 0). A finishing span reserves its bytes in the arena
 * with a CAS on the arena offset, writes them, counts itself, then drops its count with
 * acq_rel: concurrent exits of one segment on different threads write disjoint arena ranges.
 *
 * Segment completion rule: a segment ends when its LAST open span finishes, whichever it is.
 * Normally that is the entry span (exits finish before the response is written); if the entry
 * finishes while exits are still open, the segment waits for them and completes when the last
 * one finishes (its spans are then recorded complete). The thread that drops the count to 0
 * writes the record (header + arena) into the ring and frees the slot. An exit that is never
 * finished (the connection layer lost track of it) would keep its segment forever, so when a
 * pool is exhausted a slow path (reap, at most once a second) closes every exit still open
 * REAP_AFTER_MS after its segment's root span finished, with an error log (error.kind
 * `timeout`); its segment then completes and frees its slots. Entries are never reaped (a
 * long streamed response is legitimate).
 *
 * Unsampled and ignored requests still get an entry span slot, so that exits made while
 * serving them know they belong to an unsampled request: they send no sw8 (only
 * sw8-correlation) and record nothing, instead of starting new root traces. Their entry handle
 * is therefore not 0. Only when there is an incoming sw8-correlation to pass on do they also
 * get a segment (to hold it; nothing is written to its arena and nothing is committed); else
 * the span's segment is SEG_NONE and the request costs a span slot claim and nothing else: no
 * ids, no names, no segment.
 *
 * The current request of a thread (initial-exec TLS). sw_trace_entry_start makes the new
 * entry current and remembers it in a small per-thread list of recently started entries; the
 * connection layer makes an entry current again (sw_trace_touch) when one of its connections
 * is read or written. When the current entry ends, the thread has no current request (0) until
 * the next of those: nothing says which of its other open requests it works for.
 *   - sw_trace_request_now (the connection layer's rules, docs/architecture.md "Which request
 *     an outbound call belongs to"): the current request; else the thread's one open request;
 *     else 0 (none) or SW_TRACE_UNKNOWN (several open). sw_trace_exit_start_in joins the
 *     request it is given, or, for SW_TRACE_UNKNOWN or a request that has ended, makes a root
 *     exit segment tagged swagent.parent=unknown and counts it (g_parent_unknown, the ring's
 *     parent_unknown).
 *   - sw_trace_exit_start (and the exec context) keep the older guess: the current request if
 *     open, else the most recently started still-open request of this thread, else a root exit
 *     segment (the exit is span 0, parent -1, and the segment ends when it finishes).
 *   - Thread pools: a request read on thread A and an upstream call made on thread B: B has no
 *     current request, so the call becomes a separate root exit segment (its own trace) unless
 *     the connection layer names A (a connection opened while A was current). Limit: without
 *     that the two traces are not linked.
 *
 * Ring and reporter. The ring is created lazily through pthread_once on the first segment to
 * commit (sw_ring_create in cfg->runtime_dir, which it creates 0700 if missing); then the
 * reporter is started (sw_spawn_reporter, which itself checks whether one runs). While
 * segments are committed, sw_spawn_reporter is called again at most once per SPAWN_EVERY_MS
 * per process, to restart a reporter that died. No ring: the segment is dropped and counted,
 * and the failure is logged once. A ring with no room for another segment: new traces are not
 * started (admission, see ring_admits), so the segments already started still find room.
 *
 * The usual request. A sampled entry with nothing incoming to decode (entry_usual) and its end
 * as the last span of its segment (span_end_in) take inline paths: the same steps as the
 * general ones (entry_any, span_end_rest) without their tests, its two ids drawn inline
 * (sw_id_next2_in), the span's names and its prebuilt record written in one pass (span_fill_in,
 * root_image_usual), the record patched and copied into the ring by the end itself
 * (seg_commit_image_in, sw_ring_put_segment). The request path's limits come from the
 * configuration once, at sw_trace_init (g_lim). test_trace runs its requests both ways
 * (path_valid or not) and test_trace_writer holds the inline writers to the general ones.
 */
#include "common.h"

#include "clock.h"
#include "config.h"
#include "id.h"
#include "log.h"
#include "profile.h"
#include "propagation.h"
#include "record.h"
#include "ring.h"
#include "sampler.h"
#include "spawn.h" /* agent/spawn.h (the directory of this file is searched first) */
#include "svcblock.h"
#include "trace.h"

#include <limits.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <fcntl.h>
#include <sys/stat.h>

/*
 * Component 49 is SkyWalking's generic "http" component. There is no C / native / LD_PRELOAD
 * component in component-libraries.yml, and cpp2sky's 9000 (EnvoyProxy, the C++ range) is in
 * OAP's noUpstreamRealAddressAgents list, which makes exit spans with it build no client-side
 * instance relation; 49 keeps the topology working until an id of our own exists upstream.
 */
#define SW_COMPONENT_HTTP 49

#define SEG_SLOTS 1024u           /* open segments */
#define SPAN_SLOTS 4096u          /* open spans */
#define ARENA_BYTES (16u * 1024u) /* finished spans of one open segment */
#define OP_MAX 256u               /* operation name bytes (cut to operation_name_threshold) */
#define PEER_MAX SW_PROP_ADDR_MAX
#define METHOD_MAX 16u
#define URL_MAX 1024u
#define HOST_MAX 256u /* the url's authority (a Host header is at most 255 bytes) */
/*
 * Arena bytes only the root span (span 0, which finishes last) may use: a record without span 0
 * is rejected by the reporter, losing the whole segment, so children that would eat into this
 * are dropped (isSizeLimited) instead. The caps here bound a root: operation name, peer, url,
 * http.headers, http.params and correlation tags at their maxima (~3.9 KiB), one ref with every
 * name at its propagation.h maximum (~0.9 KiB) and an error log (~0.6 KiB) come to ~5.9 KiB.
 */
#define ROOT_RESERVE (6u * 1024u)
#define HDRS_MAX 1024u
#define CTAGS_MAX 512u   /* correlation.auto_tag_keys tags of an entry, record.h strings */
#define PARAMS_MAX 1024u /* http.params tag bytes (cut to http_params_length_threshold) */
#define LOGSTR_MAX 256u  /* error.kind and message of an error log */
#define OPEN_ENTRIES SW_TRACE_OPEN_ENTRIES
#define SPAWN_EVERY_MS 5000 /* at most one reporter spawn attempt per this many ms */
#define SEG_BROKEN 0x80u    /* internal segment flag: a span did not serialise exactly */
#define REAP_AFTER_MS 30000 /* exits open this long after their root finished are closed */
#define REAP_EVERY_MS 1000  /* the reaper runs at most this often (pool exhaustion only) */
#define EXEC_CTX_MS 600000  /* an inherited exec context is used this long after start */
#define EXEC_SLOTS 64u      /* forks with a pending EXEC exit span, per process tree */
#define EXEC_EXITS 4u       /* EXEC exit spans of forks made while serving one request */

/* Keeping beyond the quota: internal segment flags of keepable segments (see there). */
#define SEG_KEPT 0x40u         /* kept (keep_promote): committed when it completes */
#define SEG_EXIT_FAILED 0x20u  /* an exit failed (an error log, or a 5xx answer) */
#define SEG_KEEP_REFUSED 0x10u /* keep_promote refused it (counted once) */
#define SEG_PROFILED 0x08u     /* keepable and watched by a profile task: its ids are drawn */

/* How a span is written to its record (record.h): an HTTP span keeps the request's parts (its
 * operation name, url and http.* tags are put together by the reporter), a named span its
 * operation name and peer as they are (EXEC spans). */
enum span_form { FORM_NAMED = SW_REC_FORM_NAMED, FORM_HTTP = SW_REC_FORM_HTTP };

/*
 * The names of a span, written once in record.h layout when it starts, so a finishing span
 * copies them with one memcpy: FORM_HTTP its parts (str method .. str peer), FORM_NAMED
 * str operation name; str peer.
 */
#define VAR_MAX (2 + METHOD_MAX + 2 + URL_MAX + 6 + 2 + HOST_MAX + 4 + 2 + HDRS_MAX + 2 + PEER_MAX)
/*
 * A root span of FORM_HTTP also keeps its whole record prebuilt (root_image): the record
 * header before its fixed fields, and after its names the tags, ref and log counts, so the usual
 * end of a request patches its end time, status and flags and copies the record into the ring
 * in one go.
 */
#define HDR_MAX (2 + 16 + 4 + 8 + 2 + SW_ID_MAX + 2) /* a record header with a text trace id */
#define FIXED 37 /* a FORM_HTTP span's fields before its names: ids .. component, status, flags */
#define REF_MAX                                                                                    \
    (1 + 2 * (2 + SW_ID_MAX) + 4 + 2 * (2 + SW_PROP_NAME_MAX) + 2 + SW_PROP_EP_MAX + 2 +           \
     SW_PROP_ADDR_MAX)
#define TAIL_MAX (2 + CTAGS_MAX + 2 + REF_MAX + 2)

/*
 * A keepable entry's request as it came (Keeping beyond the quota): its parts are copied to the
 * end of its segment's arena, in the root's reserve (ROOT_RESERVE: no exit writes there), and
 * its root's names are made from them only if it is kept (keep_promote). Each part is kept up to
 * one byte more than span_fill keeps, so that span_fill's cuts come out the same.
 */
#define KRAW_METHOD METHOD_MAX
#define KRAW_TARGET URL_MAX
#define KRAW_HOST HOST_MAX
#define KRAW_HDRS HDRS_MAX
#define KRAW_PEER PEER_MAX
#define KRAW_MAX (KRAW_METHOD + KRAW_TARGET + KRAW_HOST + KRAW_HDRS + KRAW_PEER)
_Static_assert(KRAW_MAX <= ROOT_RESERVE, "a keepable request's parts fit the root's reserve");
struct keep_raw {
    uint16_t ml, tl, hl, dl, pl; /* method, target, host, http.headers, peer */
    uint16_t path_off, path_len; /* the path in the target (path_ok) */
    bool path_ok, host, tls;
    bool filled; /* the root's names are made already (entry_any) */
};

/* An open span. Written by its claimer before publication, read by its finisher (and, for the
 * root span of a segment, by exits of that segment: see struct seg). */
struct span {
    uint32_t gen; /* generation of the current claim, owner-only */
    int32_t span_id;
    int32_t parent_id;
    uint8_t type;       /* enum sw_span_type */
    uint8_t layer;      /* enum sw_span_layer: Http, Unknown for EXEC spans */
    uint8_t form;       /* enum span_form */
    bool recorded;      /* false: the segment is unsampled, nothing is written */
    uint8_t http_flags; /* FORM_HTTP: SW_REC_HTTP_* (how the url tag is made) */
    uint8_t method_len; /* FORM_HTTP: the method is at var + 2 */
    uint8_t ctags_n;    /* tags in ctags */
    int64_t start_ms;
    uint16_t var_len;
    /* Where the names are in var: FORM_HTTP the target (cut to URL_MAX - 1) at target_off, the
     * operation name's path in it and the operation name's length; FORM_NAMED the operation
     * name (op_len bytes) at var + 2. Both: the peer at peer_off. */
    uint16_t target_off, target_len, path_off, path_len, op_len, peer_off, peer_len;
    uint16_t img_len; /* root of FORM_HTTP: the prebuilt record's length (root_image) */
    /* Database and cache exits (sw_trace_db_start_in): component id, and tags in record.h
     * layout (str key; str value) kept in img right after the names (SPAN_VAR + var_len). */
    int32_t component;
    uint16_t xtags_len;
    uint8_t xtags_n;
    bool rpc; /* an RPC span (sw_trace_span_rpc): its status tag is rpc.status_code, 0 too */
    /* Reset at every claim (span_reset): kept together for a few wide stores. */
    uint64_t close_with; /* an exec root entry (handle) that ends when this span ends */
    uint64_t xgen;       /* EXEC exit of a fork: the generation of its exec slot's claim */
    uint32_t xslot;      /* ... and that exec slot's index + 1, else 0 */
    uint16_t ctags_len;
    uint16_t hdr_len; /* root of FORM_HTTP: the prebuilt record's header (root_image), or 0 */
    _Atomic uint64_t exec_exits[EXEC_EXITS]; /* entry: EXEC exits of forks, ended with it */
    _Atomic uint32_t exec_any; /* entry: set before a fork attaches an EXEC exit (span_end) */
    char ctags[CTAGS_MAX];     /* correlation.auto_tag_keys: key, value strings (record.h) */
    /* [record header, root only, ending at HDR_MAX][fixed fields][names (var)][tail, root] */
    _Alignas(8) uint8_t img[HDR_MAX + FIXED + VAR_MAX + TAIL_MAX];
};
#define SPAN_VAR(sp) ((sp)->img + HDR_MAX + FIXED)
/* A database or cache exit's tags: after its names and 2 bytes for their count (db_image). */
#define SPAN_XTAGS(sp) (SPAN_VAR(sp) + (sp)->var_len + 2)

/*
 * An open segment. Fields other than the atomics are written only by the claiming thread
 * before the segment is published (seg_live) and are immutable while it is open. The root span
 * (span 0) lives in the segment itself and stays there until the segment completes, so an exit
 * holding a count reads the root's names (for its sw8 field 7) in place.
 */
struct seg {
    uint32_t gen;                 /* generation of the current claim, owner-only */
    bool sampled;                 /* false: nothing is recorded (unsampled or ignored) */
    bool keep;                    /* keepable: unsampled, its spans recorded in case it is kept */
    struct keep_raw kraw;         /* keepable: its request as it came (keep_raw_save) */
    bool skip_analysis;           /* sw8-x tracing mode 1: every span gets skipAnalysis */
    bool has_ref;                 /* ref (the decoded sw8) is valid: its trace id is ours */
    uint32_t tid;                 /* ids (id.h): <uuid>.<tid>.<value> */
    uint64_t seg_value;           /* the segment id */
    uint64_t trace_value;         /* the trace id, when !has_ref */
    _Atomic int32_t next_span_id; /* the next span id to hand out */
    _Atomic uint32_t arena_off;   /* bytes of the arena reserved by finished spans */
    _Atomic uint32_t span_count;  /* spans completely written into the arena */
    _Atomic uint32_t flags;       /* SW_REC_SEG_SIZE_LIMITED, SEG_BROKEN */
    _Atomic int64_t root_end_ms;  /* end time of the root span (span 0), 0 while it is open */
    uint16_t corr_len;
    char corr[SW_CORR_MAX]; /* filtered sw8-correlation to pass on, corr_len bytes */
    struct sw_sw8 ref;      /* decoded incoming sw8 (the entry span's ref) */
    struct span root;       /* span 0; its handle's slot is SPAN_SLOTS + the segment's slot */
    _Alignas(8) uint8_t arena[ARENA_BYTES]; /* finished spans (but a root that finishes alone) */
};

/* The words other threads look at, kept apart from the big structs so the atfork reset
 * touches a few pages only. */
struct span_hot {
    _Atomic uint64_t state; /* the span's handle while open, else 0 */
    _Atomic uint64_t seg;   /* gen << 32 | segment slot, valid while state is the handle */
};

struct bitpool {
    _Atomic uint64_t *words;
    uint32_t nwords;
    uint32_t nslots; /* slots usable (tests may lower it) */
};

static const struct sw_config *g_cfg;
static const uint8_t *g_uuid; /* the process uuid's 16 bytes (id.h; redrawn in place on fork) */
/*
 * The base64 of "<process uuid hex>." (33 bytes, whole groups of three), so an id's base64 for
 * sw8 is this and the base64 of "<tid>.<value>" (id_b64). Made again when the uuid is drawn
 * again (after fork).
 */
static char g_uuid_b64[44];
static bool g_uuid_b64_ok;
/* sw8's service and instance fields, encoded once (sw_sw8_svc_inst): they never change. */
static char g_svc_inst[2 * (SW_CFG_NAME_MAX / 3 + 1) * 4 + 4];
static size_t g_svc_inst_len;
static bool g_ready;
static int64_t g_start_ms;
static void *g_map;
static size_t g_map_bytes;
static struct seg *g_segs;
static struct span *g_spans;
static struct span_hot *g_span_hot;
static _Atomic uint64_t *g_seg_live;
static struct bitpool g_seg_pool;
static struct bitpool g_span_pool;
static struct sw_sampler g_sampler;
static struct sw_sampler g_keep_sampler;        /* swagent.keep_n_per_3_secs */
static _Atomic uint64_t g_keep[SW_RING_KEEP_N]; /* enum sw_ring_keep */

static pthread_once_t g_ring_once = PTHREAD_ONCE_INIT;
static struct sw_ring *_Atomic g_ring;
/*
 * Exec context (CGI): what a program exec'ed by this process gets in SW_AGENT_PARENT_CTX, and
 * what this process got. See sw_trace_exec_context.
 */
static struct {
    bool valid;
    char trace_id[SW_ID_MAX];
    char seg_id[SW_ID_MAX];
    char endpoint[OP_MAX];
    int32_t span_id; /* the EXEC exit span of the fork, 0: none (the entry) */
    uint32_t xslot;  /* its exec slot index + 1, 0: none */
    uint64_t xgen;
} g_fork_parent;                    /* the request being served when this process forked */
static struct sw_sw8 g_exec_parent; /* decoded SW_AGENT_PARENT_CTX of this process */
static char g_exec_raw[SW_SW8_MAX]; /* ... and as received, to pass on unchanged */

/*
 * EXEC exit spans of fork + exec (CGI). The fork happens in the parent while it serves a
 * request, the exec in the child, and only the child knows the program. At fork (atfork
 * prepare) the parent opens an Exit span in the request's segment and claims an exec slot
 * in a small MAP_SHARED anonymous mapping (inherited by forked children, gone in exec'ed
 * images) made by the first such fork: a shared mapping costs a shmem inode (~5 us), which
 * every process start paid when it was made at init, though few programs fork while serving.
 * The child, when it execs, writes its `exec:<program>` address (the
 * sw8 field 8 it passes on) into the slot; when the parent's entry span ends, the exit span
 * takes that address as its peer (`EXEC:<program>` as its name) and ends at the same time.
 * A child that never execs (or had not yet when the request ended) leaves the slot empty
 * and the exit span is not recorded. Slot word: generation << 2 | state.
 * EXEC spans (this exit and the exec'ed child's EXEC entry) have layer Unknown (an exec is no
 * HTTP call, and OAP's HTTP status rules do not apply) and component 49 like every other span
 * (0 would be displayed as "Unknown" and is no component an OAP relation can use). The
 * exit span starts at the fork and ends with the request's entry span (a CGI server waits
 * for its child before its part of the response ends), so it never delays the segment.
 */
enum { XS_FREE = 0, XS_CLAIMED = 1, XS_WRITING = 2, XS_DONE = 3 };
struct exec_slot {
    _Atomic uint64_t state;
    uint16_t len;
    char addr[PEER_MAX];
};
/* EXEC_SLOTS, MAP_SHARED; NULL until a fork while serving a request maps it (xslots_map) */
static struct exec_slot *_Atomic g_xslots_p;
#define g_xslots atomic_load_explicit(&g_xslots_p, memory_order_acquire)
static struct {
    bool valid;
    int32_t span_id;
    uint32_t xslot;
    uint64_t xgen;
} g_fork_exit; /* set by the prepare handler, read by the child after fork */
static size_t g_exec_raw_len;
static char g_exec_op[OP_MAX]; /* "EXEC:<basename of the executable>" */
static uint16_t g_exec_op_len;
static uint32_t g_init_euid;    /* effective uid when sw_trace_init ran */
static char g_rundir[PATH_MAX]; /* runtime dir of the ring; written before g_ring is set */
static _Atomic bool g_ring_failed;
static _Atomic int64_t g_last_spawn_ms;
static _Atomic bool g_spawn_logged; /* a failed start of the reporter was logged */

static _Atomic uint64_t g_committed;
static _Atomic uint64_t g_dropped;
static _Atomic uint64_t g_shed;
static _Atomic uint64_t g_parent_unknown; /* exits given no parent (sw_trace_exit_start_in) */
static _Atomic bool g_shed_logged;
static void fill_set(struct sw_ring *r); /* admission (see ring_admits) */
static _Atomic uint64_t g_limited;
static _Atomic uint64_t g_spans_dropped;
static _Atomic uint64_t g_reaped;
static _Atomic int64_t g_last_reap_ms;

/* The thread's requests (trace.h: sw_trace_touch reads `current` inline). */
__thread __attribute__((tls_model("initial-exec"))) struct sw_trace_tls sw_trace_tls;
#define tls_trace sw_trace_tls
#define tls_current tls_trace.current
#define tls_open tls_trace.open
#define tls_open_pos tls_trace.open_pos
#define tls_open_n tls_trace.open_n
#define tls_hint tls_trace.hint

/* Test hook: lowers the usable pool sizes (0 = the full pool). */
SW_STATIC void sw_trace_test_limit_pools(uint32_t nseg, uint32_t nspan);
SW_STATIC __attribute__((unused)) void sw_trace_test_limit_pools(uint32_t nseg, uint32_t nspan)
{
    g_seg_pool.nslots = nseg && nseg < SEG_SLOTS ? nseg : SEG_SLOTS;
    g_span_pool.nslots = nspan && nspan < SPAN_SLOTS ? nspan : SPAN_SLOTS;
}

/* ---------------------------------------------------------------- small helpers */

/* CLOCK_REALTIME in ms: from the TSC where clock.c allows it, else clock_gettime(). */
SW_HOT_PATH int64_t sw_trace_now_ms(void)
{
    return sw_clock_ms();
}

/* memcpy for the short strings of a span (methods, status codes, peers, short names):
 * sw_copy_small (common.h). */
static inline __attribute__((always_inline)) void copy_small(void *dst, const void *src, size_t n)
{
    sw_copy_small(dst, src, n);
}

/* Copies at most cap-1 bytes (not cutting a UTF-8 sequence), NUL-terminates; returns length. */
static uint16_t copy_cut(char *dst, size_t cap, const char *src, size_t n)
{
    if (!src)
        n = 0;
    if (n > cap - 1) {
        n = cap - 1;
        while (n > 0 && ((unsigned char)src[n] & 0xc0u) == 0x80u)
            n--;
    }
    copy_small(dst, src, n);
    dst[n] = '\0';
    return (uint16_t)n;
}

/* copy_cut's length: n cut to at most `max` bytes without cutting a UTF-8 sequence. */
static inline size_t fit_len(const char *src, size_t n, size_t max)
{
    if (SW_UNLIKELY(n > max)) {
        n = max;
        while (n > 0 && ((unsigned char)src[n] & 0xc0u) == 0x80u)
            n--;
    }
    return n;
}

/* Appends to dst (len *at, capacity cap); false when it does not fit. */
static bool append(char *dst, size_t cap, size_t *at, const char *src, size_t n)
{
    if (n > cap - *at)
        return false;
    memcpy(dst + *at, src, n);
    *at += n;
    return true;
}

static size_t put_int(char *buf, int v)
{
    if (SW_LIKELY(v >= 100 && v <= 999)) { /* an HTTP status code */
        buf[0] = (char)('0' + v / 100);
        buf[1] = (char)('0' + v / 10 % 10);
        buf[2] = (char)('0' + v % 10);
        return 3;
    }
    char tmp[16];
    size_t n = 0, o = 0;
    unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        buf[o++] = '-';
    while (n)
        buf[o++] = tmp[--n];
    return o;
}

/* The path of a request target: scheme and authority of an absolute-form target removed,
 * query and fragment cut. */
SW_HOT static const char *target_path(const char *t, size_t n, size_t *out_len)
{
    if (!t) {
        *out_len = 0;
        return "";
    }
    if (n >= 7 && t[0] == 'h' &&
        (memcmp(t, "http://", 7) == 0 || (n >= 8 && memcmp(t, "https://", 8) == 0))) {
        size_t i = t[4] == 's' ? 8 : 7;
        while (i < n && t[i] != '/' && t[i] != '?')
            i++;
        t += i;
        n -= i;
    }
    /* memchr rather than a byte loop: this runs twice per traced request. */
    const char *q = n ? memchr(t, '?', n) : NULL;
    if (q)
        n = (size_t)(q - t);
    const char *f = n ? memchr(t, '#', n) : NULL;
    *out_len = f ? (size_t)(f - t) : n;
    return t;
}

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/*
 * target_path of an origin-form target in a padded buffer (sw_req_info.padded), 16 bytes at a
 * time; it also finds where the path's suffix begins (after its last '.', when no '/' follows
 * it), for agent.ignore_suffix: *suf is NULL when there is none, and *scanned says it was
 * looked for. Other targets: target_path (*scanned false).
 */
static inline const char *path_scan(const char *t, size_t n, bool padded, size_t *out_len,
                                    const char **suf, bool *scanned)
{
#if defined(__SSE2__)
    if (SW_LIKELY(padded && n && t[0] == '/')) {
        const __m128i q = _mm_set1_epi8('?'), h = _mm_set1_epi8('#');
        const __m128i d = _mm_set1_epi8('.'), sl = _mm_set1_epi8('/');
        size_t dot = 0, slash = 0; /* 1 + the position of the last '.' and '/' seen */
        for (size_t i = 0; i < n; i += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(t + i));
            unsigned end = (unsigned)_mm_movemask_epi8(
                _mm_or_si128(_mm_cmpeq_epi8(v, q), _mm_cmpeq_epi8(v, h)));
            if (n - i < 16)
                end |= 1u << (n - i); /* the target's end */
            unsigned keep = end ? (1u << __builtin_ctz(end)) - 1 : 0xffffu;
            unsigned dm = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, d)) & keep;
            unsigned sm = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, sl)) & keep;
            if (dm)
                dot = i + 32 - (size_t)__builtin_clz(dm);
            if (sm)
                slash = i + 32 - (size_t)__builtin_clz(sm);
            if (end) {
                *out_len = i + (size_t)__builtin_ctz(end);
                *suf = dot > slash ? t + dot : NULL;
                *scanned = true;
                return t;
            }
        }
        *out_len = n;
        *suf = dot > slash ? t + dot : NULL;
        *scanned = true;
        return t;
    }
#endif
    (void)padded;
    *suf = NULL;
    *scanned = false;
    return target_path(t, n, out_len);
}

static int op_threshold(void)
{
    int th = g_cfg->operation_name_threshold;
    if (th <= 0 || th > (int)OP_MAX - 1)
        th = (int)OP_MAX - 1;
    return th;
}

/*
 * What span_fill's usual case needs of the configuration, worked out once by lim_make (at
 * sw_trace_init: the configuration does not change afterwards; tests that change it call
 * sw_trace_init again).
 */
static struct {
    uint32_t op;     /* op_threshold() */
    uint32_t peer;   /* the longest peer kept whole: PEER_MAX - 1, or plugin.peer_max_length */
    bool params[2];  /* collect_http_params of [0] exit, [1] entry spans */
    bool cluster;    /* agent.cluster is set: exit peers are `<cluster>/<peer>` (cluster_peer) */
    bool keep;       /* swagent.keep_errors or keep_slow_ms: unsampled requests are keepable */
    int64_t slow_ms; /* swagent.keep_slow_ms, 0: off */
} g_lim;

static void lim_make(void)
{
    int pmax = g_cfg->peer_max_length;
    g_lim.op = (uint32_t)op_threshold();
    g_lim.peer = pmax > 0 && (size_t)pmax < PEER_MAX - 1 ? (uint32_t)pmax : PEER_MAX - 1;
    g_lim.params[0] = g_cfg->collect_http_params_exit;
    g_lim.params[1] = g_cfg->collect_http_params_entry;
    g_lim.cluster = g_cfg->cluster[0] != '\0';
    g_lim.slow_ms = g_cfg->keep_slow_ms > 0 ? g_cfg->keep_slow_ms : 0;
    g_lim.keep = g_cfg->keep_errors || g_lim.slow_ms > 0;
}

/* A piece of a string built by cat_cut. */
struct piece {
    const char *p;
    size_t n;
};

/* The byte at offset `at` of the concatenation of pieces (at < their total length). */
static unsigned char piece_byte(const struct piece *pc, size_t at)
{
    while (at >= pc->n) {
        at -= pc->n;
        pc++;
    }
    return (unsigned char)pc->p[at];
}

/*
 * The length of the concatenation of `np` pieces cut to at most `lim` bytes without cutting a
 * UTF-8 sequence (as copy_cut does). The span's record carries this length and its parts; the
 * reporter puts the bytes together (record.h).
 */
static uint16_t cut_len(const struct piece *pc, int np, size_t lim)
{
    size_t total = 0;
    for (int i = 0; i < np; i++)
        total += pc[i].n;
    size_t n = total;
    if (n > lim) {
        n = lim;
        while (n > 0 && (piece_byte(pc, n) & 0xc0u) == 0x80u)
            n--;
    }
    return (uint16_t)n;
}

/* The length of the operation name `METHOD:/path` (just the path, or "/", when there is no
 * method: a connect that failed before any request was written) cut to
 * agent.operation_name_threshold. `path` is target_path() of the request's target. */
static inline uint16_t op_len_of(const char *method, size_t ml, const char *path, size_t plen)
{
    if (plen == 0) {
        path = "/";
        plen = 1;
    }
    size_t lim = (size_t)op_threshold();
    size_t full = (ml ? ml + 1 : 0) + plen;
    if (SW_LIKELY(full <= lim))
        return (uint16_t)full; /* nothing to cut (the usual case) */
    struct piece pc[3];
    int np = 0;
    if (ml) {
        pc[np++] = (struct piece){method, ml};
        pc[np++] = (struct piece){":", 1};
    }
    pc[np++] = (struct piece){path, plen};
    return cut_len(pc, np, lim);
}

/* The url tag: http(s)://<host><target>, or the target as it is when it is absolute or there
 * is no host, cut to URL_MAX - 1. Returns its length and sets SW_REC_HTTP_* in *flags. */
static inline uint16_t url_len_of(const char *t, size_t tn, const char *host, size_t host_len,
                                  bool tls, uint8_t *flags)
{
    bool absolute =
        tn >= 7 && t[0] == 'h' && (memcmp(t, "http://", 7) == 0 || memcmp(t, "https:/", 7) == 0);
    *flags = 0;
    if (!absolute && host && host_len) {
        size_t sl = tls ? 8 : 7;
        *flags = (uint8_t)(SW_REC_HTTP_URL_HOST | (tls ? SW_REC_HTTP_TLS : 0));
        if (SW_LIKELY(sl + host_len + tn <= URL_MAX - 1))
            return (uint16_t)(sl + host_len + tn);
        struct piece pc[3] = {{tls ? "https://" : "http://", sl}, {host, host_len}, {t, tn}};
        return cut_len(pc, 3, URL_MAX - 1);
    }
    if (SW_LIKELY(tn <= URL_MAX - 1))
        return (uint16_t)tn;
    struct piece pc[1] = {{t, tn}};
    return cut_len(pc, 1, URL_MAX - 1);
}

/* ---------------------------------------------------------------- pools */

SW_HOT static SW_NOINLINE int pool_claim_any(struct bitpool *p)
{
    uint32_t nw = (p->nslots + 63) / 64;
    uint32_t start = tls_hint < nw ? tls_hint : 0;
    for (uint32_t i = 0; i < nw; i++) {
        uint32_t w = start + i < nw ? start + i : start + i - nw;
        uint64_t v = sw_atomic_load_relaxed(&p->words[w]);
        while (~v) {
            unsigned bit = (unsigned)__builtin_ctzll(~v);
            uint32_t slot = w * 64 + bit;
            if (slot >= p->nslots)
                break;
            if (atomic_compare_exchange_weak_explicit(&p->words[w], &v, v | (1ull << bit),
                                                      memory_order_acq_rel, memory_order_relaxed)) {
                tls_hint = w;
                return (int)slot;
            }
        }
    }
    return -1;
}

/* pool_claim_any, the usual case first: the thread's hint word has a free slot. */
static inline __attribute__((always_inline)) int pool_claim(struct bitpool *p)
{
    uint32_t w = tls_hint;
    if (SW_LIKELY(w < p->nwords)) {
        uint64_t v = sw_atomic_load_relaxed(&p->words[w]);
        unsigned bit = (unsigned)__builtin_ctzll(~v | 1ull << 63); /* defined when full */
        uint32_t slot = w * 64 + bit;
        if (SW_LIKELY(~v && slot < p->nslots &&
                      atomic_compare_exchange_strong_explicit(&p->words[w], &v, v | (1ull << bit),
                                                              memory_order_acq_rel,
                                                              memory_order_relaxed)))
            return (int)slot;
    }
    return pool_claim_any(p);
}

static void pool_free(struct bitpool *p, uint32_t slot)
{
    atomic_fetch_and_explicit(&p->words[slot / 64], ~(1ull << (slot % 64)), memory_order_release);
}

static uint32_t next_gen(uint32_t *gen)
{
    if (++*gen == 0)
        *gen = 1;
    return *gen;
}

/*
 * Span slots: 0 .. SPAN_SLOTS - 1 are the span pool, SPAN_SLOTS + i is the root span (span 0)
 * of segment slot i (struct seg.root), which is claimed with its segment.
 */
#define ALL_SPAN_SLOTS (SPAN_SLOTS + SEG_SLOTS)
#define ROOT_SLOT(seg_slot) (SPAN_SLOTS + (uint32_t)(seg_slot))
_Static_assert(SPAN_SLOTS == SW_TRACE_SPAN_SLOTS && SEG_SLOTS == SW_TRACE_SEG_SLOTS &&
                   ALL_SPAN_SLOTS < SW_TRACE_KEEP_BIT,
               "sw_trace_entry_unrecorded (trace.h)");

/* The span slot a handle names, or -1 (0 or out of range). Does not check liveness. */
static inline int handle_slot(uint64_t h)
{
    uint32_t slot = (uint32_t)h & ~SW_TRACE_KEEP_BIT;
    if (h == 0 || slot >= ALL_SPAN_SLOTS || !g_ready)
        return -1;
    return (int)slot;
}

static inline struct span *span_at(int slot)
{
    return (uint32_t)slot < SPAN_SLOTS ? &g_spans[slot] : &g_segs[(uint32_t)slot - SPAN_SLOTS].root;
}

/* Gives a span slot back: a pool slot to its pool (a root span goes with its segment). */
static inline void span_free(int slot)
{
    if ((uint32_t)slot < SPAN_SLOTS)
        pool_free(&g_span_pool, (uint32_t)slot);
}

static inline bool span_open(uint64_t h)
{
    int slot = handle_slot(h);
    return slot >= 0 && sw_atomic_load_acquire(&g_span_hot[slot].state) == h;
}

/* Takes one count on segment `slot` of generation `gen`; false if it is gone or ending. */
static bool seg_get(uint32_t slot, uint32_t gen)
{
    uint64_t v = sw_atomic_load_acquire(&g_seg_live[slot]);
    for (;;) {
        if ((uint32_t)(v >> 32) != gen || (uint32_t)v == 0)
            return false;
        if (sw_atomic_cas_acq_rel(&g_seg_live[slot], &v, v + 1))
            return true;
    }
}

static void seg_complete(uint32_t slot);

/* Drops one count; the thread that drops the last one completes the segment. */
static void seg_put(uint32_t slot)
{
    uint64_t v = atomic_fetch_sub_explicit(&g_seg_live[slot], 1, memory_order_acq_rel);
    if ((uint32_t)v == 1)
        seg_complete(slot);
}

/* Joins the segment of open span `h` (taking a count). Returns the segment slot or -1. */
static int seg_join(uint64_t h)
{
    int s = handle_slot(h);
    if (s < 0)
        return -1;
    struct span_hot *hot = &g_span_hot[s];
    if (sw_atomic_load_acquire(&hot->state) != h)
        return -1;
    uint64_t ref = sw_atomic_load_acquire(&hot->seg);
    if (sw_atomic_load_acquire(&hot->state) != h)
        return -1;
    uint32_t slot = (uint32_t)ref, gen = (uint32_t)(ref >> 32);
    if (slot >= SEG_SLOTS || !seg_get(slot, gen))
        return -1;
    return (int)slot;
}

/* ---------------------------------------------------------------- current request */

/*
 * tls_open_n counts the non-zero entries, so the usual case (one request at a time on the
 * thread: remember, then forget it) never scans the list. Handles are unique (a generation per
 * claim), so an entry is in the list at most once.
 */
static inline __attribute__((always_inline)) void tls_remember(uint64_t h)
{
    uint64_t *e = &tls_open[tls_open_pos++ % OPEN_ENTRIES];
    if (!*e)
        tls_open_n++;
    *e = h;
    tls_current = h;
}

/* The most recently started entry of this thread that is still open, or 0. */
SW_HOT static uint64_t tls_latest_open(void)
{
    for (uint32_t i = 1; i <= OPEN_ENTRIES && tls_open_n; i++) {
        uint64_t *e = &tls_open[(tls_open_pos - i) % OPEN_ENTRIES];
        if (!*e)
            continue;
        if (span_open(*e))
            return *e;
        *e = 0;
        tls_open_n--;
    }
    return 0;
}

SW_HOT static SW_NOINLINE void tls_forget_any(uint64_t h)
{
    for (uint32_t i = 1; i <= OPEN_ENTRIES && tls_open_n; i++) {
        uint64_t *e = &tls_open[(tls_open_pos - i) % OPEN_ENTRIES];
        if (*e == h) {
            *e = 0;
            tls_open_n--;
            break;
        }
    }
    if (tls_current == h)
        tls_current = 0; /* no request is certain now (sw_trace_request_now) */
}

/* tls_forget_any for the usual case first: `h` is the only remembered entry and the latest. */
static inline void tls_forget(uint64_t h)
{
    uint64_t *e = &tls_open[(tls_open_pos - 1) % OPEN_ENTRIES];
    if (SW_LIKELY(tls_open_n == 1 && *e == h)) {
        *e = 0;
        tls_open_n = 0;
        if (tls_current == h)
            tls_current = 0; /* tls_latest_open() with nothing remembered */
        return;
    }
    tls_forget_any(h);
}

/* The current request, else the latest open one (a guess: not made current). */
SW_HOT static uint64_t current_resolve(void)
{
    uint64_t h = tls_current;
    if (h && span_open(h))
        return h;
    return tls_latest_open();
}

/* The number of open entries remembered by this thread, counting at most two. */
static uint32_t tls_open_count2(void)
{
    uint32_t n = 0;
    for (uint32_t i = 1; i <= OPEN_ENTRIES && tls_open_n && n < 2; i++) {
        uint64_t *e = &tls_open[(tls_open_pos - i) % OPEN_ENTRIES];
        if (!*e)
            continue;
        if (span_open(*e)) {
            n++;
            continue;
        }
        *e = 0;
        tls_open_n--;
    }
    return n;
}

SW_HOT uint64_t sw_trace_request_now(void)
{
    if (!g_ready)
        return 0;
    uint64_t h = tls_current;
    if (SW_LIKELY(h && span_open(h)))
        return h;
    tls_current = 0;
    uint64_t latest = tls_latest_open();
    if (!latest)
        return 0;
    return tls_open_count2() == 1 ? latest : SW_TRACE_UNKNOWN;
}

uint64_t sw_trace_current(void)
{
    if (!g_ready)
        return 0;
    return current_resolve();
}

uint64_t sw_trace_set_current(uint64_t h)
{
    if (!g_ready)
        return 0;
    if (h && h == tls_current && span_open(h))
        return h; /* already current (the usual case after every read and write) */
    uint64_t prev = current_resolve();
    if (h == 0 || span_open(h))
        tls_current = h;
    else if (tls_current && !span_open(tls_current))
        tls_current = 0;
    return prev;
}

/* ---------------------------------------------------------------- ring and reporter */

static void copy_name(char *dst, const char *src)
{
    copy_cut(dst, SW_RING_NAME_MAX, src, src ? strlen(src) : 0);
}

static void exe_basename(char *dst)
{
    char buf[512];
    long n = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0) {
        dst[0] = '\0';
        return;
    }
    size_t b = (size_t)n;
    while (b > 0 && buf[b - 1] != '/')
        b--;
    copy_cut(dst, SW_RING_NAME_MAX, buf + b, (size_t)n - b);
}

/* True when the ring file `name` (ring-<pid>-<nonce>.swr) belongs to a live process. */
static bool ring_owner_alive(const char *name)
{
    long pid = 0;
    const char *p = name + 5;
    while (*p >= '0' && *p <= '9' && pid < 0x7fffffffL)
        pid = pid * 10 + (*p++ - '0');
    if (pid <= 0 || *p != '-')
        return true; /* not our naming: counted */
    int saved = errno;
    bool alive = syscall(SYS_kill, (pid_t)pid, 0) == 0 || errno == EPERM;
    errno = saved;
    return alive;
}

/*
 * Bytes of the ring files (ring-*.swr) of live processes in `dir` (the rings of dead ones are
 * the reporter's to drain and remove). Raw syscalls; runs once per process, at ring creation,
 * never on the hot path. Unreadable entries count as 0.
 */
static uint64_t rings_bytes(const char *dir)
{
    long fd = syscall(SYS_openat, AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    uint64_t total = 0;
    _Alignas(8) char buf[4096];
    for (;;) {
        long n = syscall(SYS_getdents64, (int)fd, buf, sizeof(buf));
        if (n <= 0)
            break;
        for (long off = 0; off < n;) {
            /* struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, char name[]. */
            const char *d = buf + off;
            uint16_t reclen;
            memcpy(&reclen, d + 16, sizeof(reclen));
            if (reclen == 0)
                break;
            const char *name = d + 19;
            size_t len = strnlen(name, (size_t)reclen - 19);
            struct stat st;
            if (len > 9 && memcmp(name, "ring-", 5) == 0 &&
                memcmp(name + len - 4, ".swr", 4) == 0 &&
                syscall(SYS_newfstatat, (int)fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                S_ISREG(st.st_mode) && ring_owner_alive(name))
                total += (uint64_t)st.st_size;
            off += reclen;
        }
    }
    syscall(SYS_close, (int)fd);
    return total;
}

/*
 * Starts swagent-reporter unless one runs (sw_spawn_reporter_in). The first failure of this
 * process is logged: without it, a wrong swagent.reporter_path only showed as a ring that
 * filled up ("swagent-reporter is behind") and traces shed.
 */
static void spawn_reporter(const struct sw_config *c)
{
    int rc = sw_spawn_reporter_in(c, g_rundir);
    if (rc >= 0 || atomic_exchange_explicit(&g_spawn_logged, true, memory_order_relaxed))
        return;
    const char *why = rc == -ENOENT    ? "not found"
                      : rc == -EACCES  ? "permission denied (not executable?)"
                      : rc == -ENOEXEC ? "not an executable this system can run"
                                       : "cannot be started";
    SW_LOGE("trace: swagent-reporter %s (error %d; swagent.reporter_path=%s): segments stay in "
            "the ring until a reporter runs, and new traces are shed once it is full",
            why, -rc, c->reporter_path[0] ? c->reporter_path : "\"\", the one beside the library");
}

/*
 * The runtime directory for the uid the process has now, into out. The runtime directory
 * belongs to a uid. A process that changed uid since start (an nginx worker: forked by a root
 * master, then setuid to `nobody`) cannot use the directory computed at start: resolve it again
 * for the uid it has now (config.h rules). Slow path (syscalls).
 */
static int rundir_now(char *out, size_t cap, bool log_switch)
{
    const struct sw_config *c = g_cfg;
    int rc = 0;
    copy_cut(out, cap, c->runtime_dir, strlen(c->runtime_dir));
    bool uid_changed = (uint32_t)syscall(SYS_geteuid) != g_init_euid;
    if (c->runtime_dir_explicit || uid_changed) {
        bool switched = false;
        rc = sw_config_runtime_dir_for_uid(c, out, cap, uid_changed, &switched);
        if (switched && log_switch)
            SW_LOGI("trace: uid %ld: runtime directory %s (configured: %s)",
                    (long)syscall(SYS_geteuid), out, c->runtime_dir);
    }
    return rc;
}

/* The directory of the per-service shared block (svcblock.h): the ring's. */
static int svc_dir(char *out, size_t cap)
{
    return rundir_now(out, cap, false);
}

static void ring_create_once(void)
{
    int saved = errno;
    const struct sw_config *c = g_cfg;
    struct sw_ring_meta m;
    memset(&m, 0, sizeof(m));
    m.pid = (int32_t)syscall(SYS_getpid);
    m.start_time_ms = (uint64_t)g_start_ms;
    (void)sw_ring_proc_start_ticks(m.pid, &m.proc_start_ticks);
    copy_name(m.service, c->service_name);
    copy_name(m.instance, c->instance_name);
    /* The reporter key (config.h): the collector, with the settings id when a token or TLS is
       configured, so that only a reporter with this process's settings adopts the ring. */
    char key[SW_CFG_KEY_MAX];
    if (sw_config_reporter_key(c, key, sizeof(key)) != 0)
        key[0] = '\0';
    copy_name(m.collector, key[0] ? key : c->backend_service);
    exe_basename(m.exe);
    struct sw_ring *r = NULL;
    int rc = rundir_now(g_rundir, sizeof(g_rundir), true);
    /*
     * swagent.ring_total_cap: all rings of the user together (the files in this directory,
     * whoever made them) stay under the cap. A ring that would go past it is not created:
     * this process's segments are then dropped and counted, and this is logged once.
     */
    if (rc == 0 && c->ring_total_cap > 0) {
        uint64_t used = rings_bytes(g_rundir);
        uint64_t mine = (uint64_t)(c->ring_bytes > 0 ? c->ring_bytes : 0);
        if (used + mine > (uint64_t)c->ring_total_cap) {
            sw_atomic_store_relaxed(&g_ring_failed, true);
            SW_LOGE("trace: the rings in %s use %llu bytes; a ring of %llu more would exceed "
                    "swagent.ring_total_cap (%ld): segments of this process are dropped",
                    g_rundir, (unsigned long long)used, (unsigned long long)mine,
                    c->ring_total_cap);
            errno = saved;
            return;
        }
    }
    if (rc == 0)
        rc = sw_ring_create(g_rundir, &m, (size_t)(c->ring_bytes > 0 ? c->ring_bytes : 0), &r);
    if (rc < 0 || !r) {
        sw_atomic_store_relaxed(&g_ring_failed, true);
        SW_LOGE("trace: cannot create the segment ring in %s (error %d): segments are dropped",
                g_rundir, -rc);
        errno = saved;
        return;
    }
    sw_atomic_store_release(&g_ring, r);
    sw_profile_attach(g_rundir, m.service, r, c);
    fill_set(r);
    sw_atomic_store_relaxed(&g_last_spawn_ms, sw_trace_now_ms());
    /* The start-up line is DEBUG (agent.c): the INFO one marks a process that traces. */
    SW_LOGI("swagent %s enabled: service=%s instance=%s: first segment, ring in %s",
            SW_VERSION_STRING, c->service_name, c->instance_name, g_rundir);
    spawn_reporter(c);
    errno = saved;
}

const struct sw_config *sw_trace_config(void)
{
    return g_cfg;
}

uint32_t sw_trace_start_euid(void)
{
    return g_init_euid;
}

const char *sw_trace_runtime_dir(void)
{
    return sw_atomic_load_acquire(&g_ring) ? g_rundir : (g_cfg ? g_cfg->runtime_dir : NULL);
}

/*
 * Admission: a trace is started (sampled) only when its segment will find room in the ring.
 *
 * When swagent-reporter falls behind (it runs under SCHED_IDLE, so a saturated machine gives it
 * no CPU), the ring fills. Before, every request was still traced and its finished segment
 * dropped at the ring: the span work was done for nothing, and a segment dropped after its sw8
 * had gone downstream left the next service's segments with a parent that never arrives. Now
 * the decision is made at the start: every open segment holds SEG_HOLD bytes of room, and a
 * new trace starts only while the free bytes cover the open segments, itself and one more
 * (for the PAD record of a wrap); else the request goes unsampled (an entry span without a
 * segment: exits send no sw8, nothing is recorded), counted as shed (`swagent status`, the
 * reporter's swagent.segments.shed) and logged once. So a segment whose record is at most
 * SEG_HOLD bytes (an nginx entry's is ~160, with one exit ~400) is not dropped at the ring once
 * started, unless threads start traces at the same instant (each sees the others' segments
 * only once claimed). Larger ones can still be, and are counted as dropped.
 *
 * Cost on the usual request: while the ring has room for every slot of the segment pool
 * (used < fast_lim: a 2 MiB ring up to ~1.5 MiB in use) seven instructions: head and tail
 * loaded through their pointers, a subtraction and a compare (the minimal server of bench/:
 * 1,485 -> 1,495 instructions added per request, the rest register allocation). Past that,
 * ring_admits_slow() counts the open segments (a popcount of the pool's bitmap, 16 words).
 *
 * A shed request: ring_admits_slow() remembers the ring's head and tail of its last "no room"
 * verdict, and while both are where they were (nothing committed, nothing consumed: the usual
 * state while swagent-reporter gets no CPU) the verdict stands without counting again. Before,
 * every shed request counted (the popcount is a libgcc call per word on baseline x86-64): the
 * minimal server of bench/ spent 1,770 instructions per shed request against 1,486 per traced
 * one (nginx ~2,250 against ~1,960 in the same harness), and ~92 % of the saturated pair's
 * requests were shed; now 1,209 (nginx ~1,700). The verdict can be stale in one way: a segment
 * freed without a commit (an unsampled entry that held an incoming sw8-correlation) gives room
 * back without moving the head; the next commit or the reporter's next read ends it. Counting
 * skips the bitmap's zero words. test_ring_admission checks that 100 shed requests count once.
 * Tests: test_trace's test_ring_admission, safety_ring_overflow (threads, nobody draining),
 * reliability_drops (python3 http.server with the reporter stopped), e2e_shed (nginx proxy ->
 * python3, every python segment's parent delivered); each failed without it.
 */
#define SEG_HOLD 512u
/* Until the ring exists, head points at these zeros (its tail too: SW_RING_TAIL_AFTER_HEAD words
 * on) and fast_lim is 1: admit (the ring will be empty). No test for "no ring" on the usual
 * path. The tail is reached from the head pointer, never published apart: a reader that got the
 * placeholder head with the ring's tail read the tail unordered with the ring's creation (a data
 * race TSan found in safety_ring_overflow). */
static const _Atomic uint64_t g_no_fill[SW_RING_TAIL_AFTER_HEAD + 1];
static struct {
    const _Atomic uint64_t *_Atomic head; /* stored last (release) by fill_set */
    /* Atomic (relaxed: a plain load on x86) because another thread may read it while fill_set
     * writes it; head, stored last with release, orders it for its readers. */
    _Atomic uint64_t fast_lim; /* bytes in use below which every pool slot has its room; 0: none */
} g_fill = {&g_no_fill[0], 1};

/* The ring's head + 1 and tail at the last "no room" verdict (see Admission; 0: none). */
static _Atomic uint64_t g_noroom_head, g_noroom_tail;

/* At the ring's creation (before the first commit); the child of a fork starts with none. */
static void fill_set(struct sw_ring *r)
{
    sw_atomic_store_relaxed(&g_noroom_head, 0); /* a new ring: no verdict yet */
    sw_atomic_store_relaxed(&g_noroom_tail, 0);
    uint64_t cap = sw_ring_capacity(r), all = ((uint64_t)SEG_SLOTS + 2u) * SEG_HOLD;
    sw_atomic_store_relaxed(&g_fill.fast_lim, cap > all ? cap - all : 0);
    sw_atomic_store_release(&g_fill.head, sw_ring_fill_head(r));
}

/* After fork (the child has no ring yet): admit until its own ring exists. */
static void fill_reset(void)
{
    sw_atomic_store_relaxed(&g_noroom_head, 0);
    sw_atomic_store_relaxed(&g_noroom_tail, 0);
    sw_atomic_store_relaxed(&g_fill.head, &g_no_fill[0]);
    sw_atomic_store_relaxed(&g_fill.fast_lim, 1);
}

#ifdef SW_TESTING
/* Test hook: the times ring_admits_slow() counted the open segments (test builds only: not an
   atomic add per count in the library). */
_Atomic uint64_t sw_trace_test_room_counts;
#define ROOM_COUNTED() sw_atomic_add_relaxed(&sw_trace_test_room_counts, 1)
#else
#define ROOM_COUNTED() ((void)0)
#endif

static SW_NOINLINE __attribute__((cold)) bool ring_admits_slow(void)
{
    /* fill_set ran after g_ring was published: a real head means a ring to read. */
    struct sw_ring *r = sw_atomic_load_acquire(&g_ring);
    if (sw_atomic_load_acquire(&g_fill.head) == &g_no_fill[0] || !r)
        return true; /* the ring is being created (fill_set): it is empty */
    uint64_t cap = sw_ring_capacity(r), used = 0, head = 0, tail = 0;
    for (int i = 0; i < 4; i++) {
        tail = sw_ring_tail(r);
        head = sw_ring_head(r);
        used = head - tail;
        if (used <= cap)
            break;
    }
    if (used > cap)
        return true; /* positions that make no sense (a corrupt header): the put decides */
    /* The last verdict stands while nothing was committed or consumed since (see Admission).
       Two threads may store verdicts at once, and the head of one be read with the tail of the
       other: still no room, as the head (which only grows) is at least the one found with that
       tail, so the free bytes are at most what that verdict found. */
    uint64_t open = 0;
    if (head + 1 != sw_atomic_load_relaxed(&g_noroom_head) ||
        tail != sw_atomic_load_relaxed(&g_noroom_tail)) {
        ROOM_COUNTED();
        for (uint32_t w = 0; w < g_seg_pool.nwords; w++) {
            uint64_t bits = sw_atomic_load_relaxed(&g_seg_pool.words[w]);
            if (bits)
                open += (uint64_t)__builtin_popcountll(bits);
        }
        if (cap - used >= (open + 2u) * SEG_HOLD)
            return true;
        sw_atomic_store_relaxed(&g_noroom_tail, tail);
        sw_atomic_store_relaxed(&g_noroom_head, head + 1);
    }
    sw_atomic_add_relaxed(&g_shed, 1);
    sw_ring_count_shed(r);
    if (!sw_atomic_load_relaxed(&g_shed_logged) &&
        !atomic_exchange_explicit(&g_shed_logged, true, memory_order_relaxed)) {
        int saved = errno;
        SW_LOGW("trace: the segment ring is nearly full (%llu of %llu bytes in use, %llu segments "
                "open; swagent-reporter is behind): new traces are not sampled until it has room, "
                "counted as shed in `swagent status` (logged once)",
                (unsigned long long)used, (unsigned long long)cap, (unsigned long long)open);
        errno = saved;
    }
    return false;
}

/* True when a new trace's segment will find room in the ring (see Admission above). */
static inline __attribute__((always_inline)) bool ring_admits(void)
{
    const _Atomic uint64_t *hp = sw_atomic_load_acquire(&g_fill.head);
    uint64_t used =
        sw_atomic_load_relaxed(hp) - sw_atomic_load_relaxed(hp + SW_RING_TAIL_AFTER_HEAD);
    return SW_LIKELY(used < sw_atomic_load_relaxed(&g_fill.fast_lim)) || ring_admits_slow();
}

/* This thread is making the ring (ring_get_slow): a signal handler's write on it that reaches
 * sw_trace_ring (logcap.c) must not wait for the once it interrupted. */
static __thread __attribute__((tls_model("initial-exec"))) bool tls_ring_making;

static SW_NOINLINE struct sw_ring *ring_get_slow(void)
{
    if (sw_atomic_load_relaxed(&g_ring_failed))
        return NULL;
    tls_ring_making = true;
    pthread_once(&g_ring_once, ring_create_once);
    tls_ring_making = false;
    return sw_atomic_load_acquire(&g_ring);
}

static inline struct sw_ring *ring_get(void)
{
    struct sw_ring *r = sw_atomic_load_acquire(&g_ring);
    return SW_LIKELY(r) ? r : ring_get_slow();
}

/* Issue 37: an HTTP/2 module event, counted in this process's ring (`swagent status`). */
void sw_trace_count_h2(int k)
{
    struct sw_ring *r = ring_get();
    if (r)
        sw_ring_count_h2(r, (enum sw_ring_h2)k);
}

/* Restarts a reporter that may have died: at most once per SPAWN_EVERY_MS per process. `now`:
 * a recent clock reading (the segment's root span end time), <= 1 for none. */
static SW_NOINLINE void spawn_now(int64_t now)
{
    if (now <= 1)
        now = sw_trace_now_ms();
    int64_t last = sw_atomic_load_relaxed(&g_last_spawn_ms);
    if (now - last < SPAWN_EVERY_MS)
        return;
    if (!sw_atomic_cas_acq_rel(&g_last_spawn_ms, &last, now))
        return;
    int saved = errno;
    spawn_reporter(g_cfg);
    errno = saved;
}

static inline void maybe_spawn(int64_t now)
{
    if (SW_UNLIKELY(now - sw_atomic_load_relaxed(&g_last_spawn_ms) >= SPAWN_EVERY_MS || now <= 1))
        spawn_now(now);
}

/* ---------------------------------------------------------------- serialisation */

struct span_end {
    int status;       /* > 0: the http.status_code tag */
    bool error;       /* isError */
    const char *kind; /* non-NULL: an error log with error.kind and message */
    const char *msg;
    int64_t end_ms;
};

static size_t str_size(size_t n)
{
    return 2 + (n > 0xffff ? 0xffff : n);
}

/*
 * The unchecked writer. span_size() computed the exact size of a span and the arena (or ring)
 * range was reserved for it, so the span is written with plain stores, no bounds check per
 * field (the checked sw_wbuf writer of record.h cost about four times as much). The callers
 * compare the bytes written with the reservation and drop the segment if they differ; the unit
 * test test_trace_writer compares this writer with the checked one for many random spans.
 */
static inline uint8_t *w_u8(uint8_t *q, uint8_t v)
{
    *q = v;
    return q + 1;
}

static inline uint8_t *w_u16(uint8_t *q, uint16_t v)
{
    memcpy(q, &v, 2); /* one store: byte stores of it were merged with shifts */
    return q + 2;
}

static inline uint8_t *w_u32(uint8_t *q, uint32_t v)
{
    memcpy(q, &v, 4); /* little-endian (ring.c refuses other machines) */
    return q + 4;
}

static inline uint8_t *w_u64(uint8_t *q, uint64_t v)
{
    memcpy(q, &v, 8);
    return q + 8;
}

/* A record.h str of a length the caller has cut (n <= 0xffff): u16 length then the bytes. */
static inline __attribute__((always_inline)) uint8_t *w_str_cut(uint8_t *q, const char *s, size_t n)
{
    q = w_u16(q, (uint16_t)n);
    copy_small(q, s, n);
    return q + n;
}

/* A record.h str: u16 length then the bytes; longer than 65535 bytes is cut (str_size). */
static inline uint8_t *w_str(uint8_t *q, const char *s, size_t n)
{
    return w_str_cut(q, s, n > 0xffff ? 0xffff : n);
}

/* A constant str (a tag key): its u16 length and bytes, fixed-size stores. */
#define W_KEY(q, lit)                                                                              \
    do {                                                                                           \
        (q) = w_u16((q), (uint16_t)(sizeof(lit) - 1));                                             \
        memcpy((q), (lit), sizeof(lit) - 1);                                                       \
        (q) += sizeof(lit) - 1;                                                                    \
    } while (0)

/* The strlen of the six strings of a decoded ref, in record.h order (ref_lens). */
struct ref_lens {
    size_t n[6];
};

static void ref_lens_of(const struct sw_sw8 *r, struct ref_lens *l)
{
    for (int i = 0; i < 6; i++)
        l->n[i] = r->len[i]; /* a valid decoded sw8 keeps them (propagation.h) */
}

/* A ref list of one CrossProcess ref (record.h). */
static uint8_t *w_ref(uint8_t *q, const struct sw_sw8 *r, const struct ref_lens *rl)
{
    q = w_u16(q, 1);
    q = w_u8(q, 0); /* CrossProcess */
    q = w_str(q, r->trace_id, rl->n[0]);
    q = w_str(q, r->parent_segment_id, rl->n[1]);
    q = w_u32(q, (uint32_t)r->parent_span_id);
    q = w_str(q, r->parent_service, rl->n[2]);
    q = w_str(q, r->parent_instance, rl->n[3]);
    q = w_str(q, r->parent_endpoint, rl->n[4]);
    return w_str(q, r->address, rl->n[5]);
}

static size_t bounded_len(const char *s, size_t cap)
{
    if (!s)
        return 0;
    size_t n = strnlen(s, cap);
    /* Do not cut inside a UTF-8 sequence. */
    if (n == cap)
        while (n > 0 && ((unsigned char)s[n] & 0xc0u) == 0x80u)
            n--;
    return n;
}

/* The rpc.status_code of a gRPC status as SkyWalking's Java agent writes it (Status.Code's
 * name: "OK", "NOT_FOUND"; another number as digits), at out[24]; returns its length. */
static size_t grpc_code_name(char *out, int code)
{
    static const char *const names[] = {"OK",
                                        "CANCELLED",
                                        "UNKNOWN",
                                        "INVALID_ARGUMENT",
                                        "DEADLINE_EXCEEDED",
                                        "NOT_FOUND",
                                        "ALREADY_EXISTS",
                                        "PERMISSION_DENIED",
                                        "RESOURCE_EXHAUSTED",
                                        "FAILED_PRECONDITION",
                                        "ABORTED",
                                        "OUT_OF_RANGE",
                                        "UNIMPLEMENTED",
                                        "INTERNAL",
                                        "UNAVAILABLE",
                                        "DATA_LOSS",
                                        "UNAUTHENTICATED"};
    if (code < 0 || code >= (int)SW_ARRAY_LEN(names))
        return put_int(out, code);
    size_t n = strlen(names[code]);
    memcpy(out, names[code], n);
    return n;
}

/* What a finishing span writes besides its own fields, worked out once (span_prep). */
struct span_out {
    struct span_end e; /* msg is never NULL when kind is set */
    size_t kind_len, msg_len;
    bool ref; /* the span carries the segment's ref (an entry of a segment with one) */
    struct ref_lens rl;
    size_t status_len; /* FORM_NAMED: the status tag's value (status_txt) */
    char status_txt[24];
};

static void span_prep(struct span_out *o, const struct seg *sg, const struct span *sp,
                      const struct span_end *e)
{
    o->e = *e;
    o->kind_len = o->msg_len = 0;
    if (SW_UNLIKELY(e->kind)) {
        if (!o->e.msg)
            o->e.msg = "";
        o->kind_len = bounded_len(e->kind, LOGSTR_MAX);
        o->msg_len = bounded_len(o->e.msg, LOGSTR_MAX);
    }
    o->ref = sp->type == SW_SPAN_ENTRY && sg->has_ref;
    if (SW_UNLIKELY(o->ref))
        ref_lens_of(&sg->ref, &o->rl);
    o->status_len = sp->form == FORM_NAMED && (e->status > 0 || (sp->rpc && !e->kind))
                        ? (sp->rpc ? grpc_code_name(o->status_txt, e->status)
                                   : put_int(o->status_txt, e->status))
                        : 0;
}

static uint8_t span_flags(const struct seg *sg, const struct span_end *e)
{
    uint8_t flags = 0;
    if (e->error)
        flags |= SW_REC_SPAN_ERROR;
    if (sg->skip_analysis)
        flags |= SW_REC_SPAN_SKIP_ANALYSIS;
    return flags;
}

/* Writes an HTTP span's parts into its names (SPAN_VAR) in record.h order (FORM_HTTP: str method ..
 * str peer) and where they are into sp. Every length fits its VAR_MAX share (the callers cut:
 * w_str_cut). */
static inline __attribute__((always_inline)) void
var_http(struct span *sp, const char *m, size_t ml, const char *t, size_t tl, size_t path_off,
         size_t path_len, size_t op_len, const char *h, size_t hl, size_t url_len,
         size_t params_len, const char *d, size_t dl, const char *p, size_t pl)
{
    uint8_t *v = SPAN_VAR(sp);
    uint8_t *q = w_str_cut(v, m, ml);
    sp->target_off = (uint16_t)(q - v + 2);
    q = w_str_cut(q, t, tl);
    q = w_u16(q, (uint16_t)path_off);
    q = w_u16(q, (uint16_t)path_len);
    q = w_u16(q, (uint16_t)op_len);
    q = w_str_cut(q, h, hl);
    q = w_u16(q, (uint16_t)url_len);
    q = w_u16(q, (uint16_t)params_len);
    q = w_str_cut(q, d, dl);
    sp->peer_off = (uint16_t)(q - v + 2);
    q = w_str_cut(q, p, pl);
    sp->var_len = (uint16_t)(q - v);
    sp->form = FORM_HTTP;
    sp->method_len = (uint8_t)ml;
    sp->target_len = (uint16_t)tl;
    sp->path_off = (uint16_t)path_off;
    sp->path_len = (uint16_t)path_len;
    sp->op_len = (uint16_t)op_len;
    sp->peer_len = (uint16_t)pl;
}

/* The same for a named span (FORM_NAMED: str operation name; str peer). */
static void var_named(struct span *sp, const char *op, size_t opl, const char *p, size_t pl)
{
    uint8_t *v = SPAN_VAR(sp);
    uint8_t *q = w_str(v, op, opl);
    sp->peer_off = (uint16_t)(q - v + 2);
    q = w_str(q, p, pl);
    sp->var_len = (uint16_t)(q - v);
    sp->form = FORM_NAMED;
    sp->op_len = (uint16_t)opl;
    sp->peer_len = (uint16_t)pl;
}

/* The peer of a span, NUL-terminated in out[PEER_MAX] (for an outgoing sw8's field 8). */
static const char *span_peer(const struct span *sp, char *out)
{
    memcpy(out, SPAN_VAR(sp) + sp->peer_off, sp->peer_len);
    out[sp->peer_len] = '\0';
    return out;
}

static size_t span_size(const struct span *sp, const struct span_out *o)
{
    size_t n = 32 + sp->var_len + 2 + 2 + 2; /* fixed fields, names; tag, ref and log counts */
    if (SW_LIKELY(sp->form == FORM_HTTP))
        n += 4 + 1; /* status, http flags */
    else if (o->status_len)
        n += str_size(sp->rpc ? 15 : 16) + str_size(o->status_len);
    n += sp->ctags_len + sp->xtags_len;
    if (o->ref) {
        const struct ref_lens *rl = &o->rl;
        n += 1 + str_size(rl->n[0]) + str_size(rl->n[1]) + 4 + str_size(rl->n[2]) +
             str_size(rl->n[3]) + str_size(rl->n[4]) + str_size(rl->n[5]);
    }
    if (o->e.kind)
        n += 8 + 2 + str_size(5) + str_size(5) + str_size(10) + str_size(o->kind_len) +
             str_size(7) + str_size(o->msg_len);
    return n;
}

/* Writes the span at q (span_size bytes available); returns the end of what it wrote. */
static uint8_t *span_write(uint8_t *q, const struct seg *sg, const struct span *sp,
                           const struct span_out *o)
{
    const struct span_end *e = &o->e;
    q = w_u32(q, (uint32_t)sp->span_id);
    q = w_u32(q, (uint32_t)sp->parent_id);
    q = w_u64(q, (uint64_t)sp->start_ms);
    q = w_u64(q, (uint64_t)e->end_ms);
    q[0] = sp->type;
    q[1] = sp->layer;
    q[2] = span_flags(sg, e);
    q[3] = sp->form;
    q = w_u32(q + 4, (uint32_t)sp->component);
    bool http = sp->form == FORM_HTTP;
    if (SW_LIKELY(http)) {
        q = w_u32(q, e->status > 0 ? (uint32_t)e->status : 0u);
        q = w_u8(q, sp->http_flags);
    }
    memcpy(q, SPAN_VAR(sp), sp->var_len);
    q += sp->var_len;
    q = w_u16(q, (uint16_t)(sp->ctags_n + sp->xtags_n + (o->status_len ? 1 : 0)));
    if (SW_UNLIKELY(sp->ctags_len)) {
        memcpy(q, sp->ctags, sp->ctags_len);
        q += sp->ctags_len;
    }
    if (SW_UNLIKELY(sp->xtags_len)) {
        memcpy(q, SPAN_XTAGS(sp), sp->xtags_len);
        q += sp->xtags_len;
    }
    if (SW_UNLIKELY(o->status_len)) { /* FORM_NAMED only */
        if (sp->rpc)
            W_KEY(q, "rpc.status_code");
        else
            W_KEY(q, "http.status_code");
        q = w_str(q, o->status_txt, o->status_len);
    }
    q = SW_UNLIKELY(o->ref) ? w_ref(q, &sg->ref, &o->rl) : w_u16(q, 0);
    if (SW_UNLIKELY(e->kind)) {
        q = w_u16(q, 1);
        q = w_u64(q, (uint64_t)e->end_ms);
        q = w_u16(q, 3);
        W_KEY(q, "event");
        W_KEY(q, "error");
        W_KEY(q, "error.kind");
        q = w_str(q, e->kind, o->kind_len);
        W_KEY(q, "message");
        q = w_str(q, e->msg, o->msg_len);
    } else {
        q = w_u16(q, 0);
    }
    return q;
}

#ifdef SW_TESTING
/* The parts of a span as separate strings (the test's reference input for var). */
struct test_parts {
    int32_t status;
    const char *method, *target, *host, *hdrs, *peer, *op;
    size_t ml, tl, hl, dl, pl, opl;
    uint16_t path_off, path_len, op_len, url_len, params_len;
};

/* The reference: the same span through record.h's checked writer (test_trace_writer). */
static void span_write_checked(struct sw_wbuf *w, const struct seg *sg, const struct span *sp,
                               const struct test_parts *tp, const struct span_end *e0)
{
    struct span_end e = *e0;
    if (e.kind && !e.msg)
        e.msg = "";
    sw_wbuf_i32(w, sp->span_id);
    sw_wbuf_i32(w, sp->parent_id);
    sw_wbuf_i64(w, sp->start_ms);
    sw_wbuf_i64(w, e.end_ms);
    sw_wbuf_u8(w, sp->type);
    sw_wbuf_u8(w, sp->layer);
    sw_wbuf_u8(w, span_flags(sg, &e));
    sw_wbuf_u8(w, sp->form);
    sw_wbuf_i32(w, sp->component);
    if (sp->form == FORM_HTTP) {
        sw_wbuf_i32(w, e.status > 0 ? e.status : 0);
        sw_wbuf_u8(w, sp->http_flags);
        sw_wbuf_str(w, tp->method, tp->ml);
        sw_wbuf_str(w, tp->target, tp->tl);
        sw_wbuf_u16(w, tp->path_off);
        sw_wbuf_u16(w, tp->path_len);
        sw_wbuf_u16(w, tp->op_len);
        sw_wbuf_str(w, tp->host, tp->hl);
        sw_wbuf_u16(w, tp->url_len);
        sw_wbuf_u16(w, tp->params_len);
        sw_wbuf_str(w, tp->hdrs, tp->dl);
        sw_wbuf_str(w, tp->peer, tp->pl);
        sw_wbuf_u16(w, sp->ctags_n);
        if (sp->ctags_len)
            sw_wbuf_put(w, sp->ctags, sp->ctags_len);
    } else {
        char status[16];
        size_t status_len = e.status > 0 ? put_int(status, e.status) : 0;
        sw_wbuf_str(w, tp->op, tp->opl);
        sw_wbuf_str(w, tp->peer, tp->pl);
        sw_wbuf_u16(w, (uint16_t)(sp->ctags_n + sp->xtags_n + (status_len ? 1 : 0)));
        if (sp->ctags_len)
            sw_wbuf_put(w, sp->ctags, sp->ctags_len);
        if (sp->xtags_len)
            sw_wbuf_put(w, SPAN_XTAGS(sp), sp->xtags_len);
        if (status_len) {
            sw_wbuf_str(w, "http.status_code", 16);
            sw_wbuf_str(w, status, status_len);
        }
    }
    if (sp->type == SW_SPAN_ENTRY && sg->has_ref) {
        const struct sw_sw8 *r = &sg->ref;
        sw_wbuf_u16(w, 1);
        sw_wbuf_u8(w, 0); /* CrossProcess */
        sw_wbuf_cstr(w, r->trace_id);
        sw_wbuf_cstr(w, r->parent_segment_id);
        sw_wbuf_i32(w, r->parent_span_id);
        sw_wbuf_cstr(w, r->parent_service);
        sw_wbuf_cstr(w, r->parent_instance);
        sw_wbuf_cstr(w, r->parent_endpoint);
        sw_wbuf_cstr(w, r->address);
    } else {
        sw_wbuf_u16(w, 0);
    }
    if (e.kind) {
        sw_wbuf_u16(w, 1);
        sw_wbuf_i64(w, e.end_ms);
        sw_wbuf_u16(w, 3);
        sw_wbuf_str(w, "event", 5);
        sw_wbuf_str(w, "error", 5);
        sw_wbuf_str(w, "error.kind", 10);
        sw_wbuf_str(w, e.kind, bounded_len(e.kind, LOGSTR_MAX));
        sw_wbuf_str(w, "message", 7);
        sw_wbuf_str(w, e.msg, bounded_len(e.msg, LOGSTR_MAX));
    } else {
        sw_wbuf_u16(w, 0);
    }
}
#endif

/* Serialises a finished span into its segment's arena (the caller holds a segment count). */
static void span_record(struct seg *sg, const struct span *sp, const struct span_end *e)
{
    struct span_out o;
    span_prep(&o, sg, sp, e);
    size_t need = span_size(sp, &o);

    uint32_t cap = sp->span_id == 0 ? ARENA_BYTES : ARENA_BYTES - ROOT_RESERVE;
    uint32_t off = sw_atomic_load_relaxed(&sg->arena_off);
    for (;;) {
        if (off > cap || need > cap - off) {
            atomic_fetch_or_explicit(&sg->flags, SW_REC_SEG_SIZE_LIMITED, memory_order_relaxed);
            sw_atomic_add_relaxed(&g_spans_dropped, 1);
            return;
        }
        if (atomic_compare_exchange_weak_explicit(&sg->arena_off, &off, off + (uint32_t)need,
                                                  memory_order_relaxed, memory_order_relaxed))
            break;
    }
    uint8_t *end = span_write(sg->arena + off, sg, sp, &o);
    if ((size_t)(end - (sg->arena + off)) != need)
        atomic_fetch_or_explicit(&sg->flags, SEG_BROKEN, memory_order_relaxed);
    sw_atomic_add_relaxed(&sg->span_count, 1);
}

/* The record header (record.h) of segment `sg`: its size, and the writer of it. */
static size_t seg_hdr_size(const struct seg *sg, size_t *trace_len)
{
    *trace_len = sg->has_ref ? strnlen(sg->ref.trace_id, sizeof(sg->ref.trace_id)) : 0;
    return 2 + 16 + 4 + 8 + (sg->has_ref ? str_size(*trace_len) : 8) + 2;
}

SW_HOT static uint8_t *seg_hdr_write(uint8_t *q, const struct seg *sg, uint32_t flags,
                                     size_t trace_len, uint32_t nspans)
{
    q = w_u8(q, SW_REC_VERSION);
    q = w_u8(q, (uint8_t)((flags & SW_REC_SEG_SIZE_LIMITED) | SW_REC_SEG_OWN_IDS |
                          (sg->has_ref ? 0u : SW_REC_SEG_OWN_TRACE)));
    memcpy(q, g_uuid, 16);
    q = w_u32(q + 16, sg->tid);
    q = w_u64(q, sg->seg_value);
    q = sg->has_ref ? w_str(q, sg->ref.trace_id, trace_len) : w_u64(q, sg->trace_value);
    return w_u16(q, (uint16_t)nspans);
}

/*
 * The record of a segment whose only span is its root `sp` (FORM_HTTP), prebuilt when the span
 * starts (sp->img): the header before the span's fixed fields (start time, type, layer, form,
 * component, http flags; end time, flags and status are 0 until root_image_end), and after its
 * names its tags, its ref (the entry of a segment with one) and a log count of 0.
 */
SW_HOT static SW_NOINLINE void root_image_any(const struct seg *sg, struct span *sp)
{
    uint8_t *f = sp->img + HDR_MAX;
    size_t tl;
    size_t hl = seg_hdr_size(sg, &tl);
    seg_hdr_write(f - hl, sg, 0, tl, 1);
    w_u32(f, 0);                /* span id */
    w_u32(f + 4, (uint32_t)-1); /* parent */
    w_u64(f + 8, (uint64_t)sp->start_ms);
    w_u64(f + 16, 0); /* end (root_image_end) */
    f[24] = sp->type;
    f[25] = sp->layer;
    f[26] = 0; /* flags (root_image_end) */
    f[27] = FORM_HTTP;
    w_u32(f + 28, SW_COMPONENT_HTTP);
    w_u32(f + 32, 0); /* status (root_image_end) */
    f[36] = sp->http_flags;
    uint8_t *t0 = SPAN_VAR(sp) + sp->var_len, *t = w_u16(t0, sp->ctags_n);
    if (SW_UNLIKELY(sp->ctags_len)) {
        memcpy(t, sp->ctags, sp->ctags_len);
        t += sp->ctags_len;
    }
    if (SW_UNLIKELY(sp->type == SW_SPAN_ENTRY && sg->has_ref)) {
        struct ref_lens rl;
        ref_lens_of(&sg->ref, &rl);
        t = w_ref(t, &sg->ref, &rl);
    } else {
        t = w_u16(t, 0);
    }
    t = w_u16(t, 0); /* logs */
    sp->hdr_len = (uint16_t)hl;
    sp->img_len = (uint16_t)(hl + FIXED + (size_t)(t - SPAN_VAR(sp)));
}

/*
 * root_image for the usual root: no ref, no tags. The header's size is then fixed (own ids and
 * trace: 40 bytes), and the fields that root_image_end writes (end time, flags, status) are
 * left for it.
 */
/* (The segment's ids and the span's start, type and layer are passed in: a caller that has
 * them at hand saves reading them back after the names' byte stores.) */
static inline void root_image_usual(struct span *sp, uint32_t tid, uint64_t seg_value,
                                    uint64_t trace_value, int64_t start_ms, uint8_t type,
                                    uint8_t layer)
{
    enum { HL = 2 + 16 + 4 + 8 + 8 + 2 };
    uint8_t *f = sp->img + HDR_MAX, *q = f - HL;
    q[0] = SW_REC_VERSION;
    q[1] = SW_REC_SEG_OWN_IDS | SW_REC_SEG_OWN_TRACE;
    memcpy(q + 2, g_uuid, 16);
    w_u32(q + 18, tid);
    w_u64(q + 22, seg_value);
    w_u64(q + 30, trace_value);
    w_u16(q + 38, 1);                     /* spans */
    w_u64(f, (uint64_t)UINT32_MAX << 32); /* span id 0, parent -1 */
    w_u64(f + 8, (uint64_t)start_ms);
    /* type, layer, flags (root_image_end), form, component */
    w_u64(f + 24, (uint64_t)type | (uint64_t)layer << 8 | (uint64_t)FORM_HTTP << 24 |
                      (uint64_t)SW_COMPONENT_HTTP << 32);
    f[36] = sp->http_flags;
    w_u64(SPAN_VAR(sp) + sp->var_len, 0); /* tags, refs, logs: 0 (2 bytes more are scratch) */
    sp->hdr_len = HL;
    sp->img_len = (uint16_t)(HL + FIXED + sp->var_len + 6);
}

static inline void root_image(const struct seg *sg, struct span *sp)
{
    if (SW_UNLIKELY(sg->has_ref || sp->ctags_len))
        root_image_any(sg, sp);
    else
        root_image_usual(sp, sg->tid, sg->seg_value, sg->trace_value, sp->start_ms, sp->type,
                         sp->layer);
}

/*
 * The root's prebuilt record completed by the end of the span (no error log: that goes through
 * span_write): end time, flags and status patched in. Returns the record and its length in
 * *len. The caller owns the segment exclusively (its last count).
 */
static inline __attribute__((always_inline)) const uint8_t *
root_image_end(const struct seg *sg, struct span *sp, const struct span_end *e, size_t *len)
{
    uint8_t *f = sp->img + HDR_MAX;
    if (SW_LIKELY(sp->form == FORM_HTTP))
        w_u32(f + 32, e->status > 0 ? (uint32_t)e->status : 0u);
    else
        f += FIXED - 32; /* FORM_NAMED (db_image): no status, no http flags */
    uint8_t *h = f - sp->hdr_len;
    w_u64(f + 16, (uint64_t)e->end_ms);
    f[26] = span_flags(sg, e);
    /* The image's header flags never have it (root_image): set it when the segment has. */
    if (SW_UNLIKELY(sw_atomic_load_relaxed(&sg->flags) & SW_REC_SEG_SIZE_LIMITED))
        h[1] |= SW_REC_SEG_SIZE_LIMITED;
    *len = sp->img_len;
    return h;
}

#ifdef SW_TESTING
static uint64_t test_rand(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* Random bytes (UTF-8 continuation bytes included, so cuts are exercised), NUL-terminated. */
static size_t test_fill(uint64_t *x, char *dst, size_t cap)
{
    size_t n = (size_t)(test_rand(x) % 4 == 0 ? cap - 1 : test_rand(x) % cap);
    for (size_t i = 0; i < n; i++)
        dst[i] = (char)(test_rand(x) % 3 == 0 ? 0x80 + test_rand(x) % 64 : 'a' + test_rand(x) % 26);
    dst[n] = '\0';
    return n;
}

/* A random segment ref, its field lengths kept as sw_sw8_decode keeps them. */
static void test_fill_ref(uint64_t *x, struct sw_sw8 *r)
{
    char *fs[6] = {r->trace_id,        r->parent_segment_id, r->parent_service,
                   r->parent_instance, r->parent_endpoint,   r->address};
    size_t caps[6] = {sizeof(r->trace_id),        sizeof(r->parent_segment_id),
                      sizeof(r->parent_service),  sizeof(r->parent_instance),
                      sizeof(r->parent_endpoint), sizeof(r->address)};
    for (int i = 0; i < 6; i++)
        r->len[i] = (uint16_t)test_fill(x, fs[i], caps[i]);
    r->parent_span_id = (int32_t)test_rand(x);
}

/* Up to `n` random tags (keys < 80 bytes, values < vmax) written at dst (cap bytes) as record.h
 * strings: those that fit; their count to *count, their bytes returned. */
static uint16_t test_tags(uint64_t *x, uint8_t *dst, size_t cap, int n, size_t vmax,
                          uint16_t *count)
{
    struct sw_wbuf w;
    sw_wbuf_init(&w, dst, cap);
    *count = 0;
    for (int t = n; t > 0; t--) {
        char k[80], v[1200];
        size_t at = w.len;
        sw_wbuf_str(&w, k, test_fill(x, k, sizeof(k)));
        sw_wbuf_str(&w, v, test_fill(x, v, vmax < sizeof(v) ? vmax : sizeof(v)));
        if (w.overflow) {
            w.len = at;
            w.overflow = false;
        } else {
            (*count)++;
        }
    }
    return (uint16_t)w.len;
}

/*
 * Test hook (test_trace_writer): `rounds` random spans (lengths up to every limit, refs,
 * logs, correlation tags) written by span_write and by the checked writer. Returns the number
 * of spans where the size or the bytes differ, or where span_write wrote past span_size.
 */
SW_STATIC int sw_trace_test_writer(uint64_t seed, int rounds);
SW_STATIC int sw_trace_test_writer(uint64_t seed, int rounds)
{
    static struct seg sg;
    static struct span sp;
    static uint8_t fast[ARENA_BYTES + 64], ref[ARENA_BYTES * 2];
    static char kind[LOGSTR_MAX + 64], msg[LOGSTR_MAX + 64];
    uint64_t x = seed ? seed : 1;
    int bad = 0;
    for (int round = 0; round < rounds; round++) {
        memset(&sp, 0, sizeof(sp));
        sp.span_id = (int32_t)test_rand(&x);
        sp.parent_id = (int32_t)test_rand(&x);
        sp.start_ms = (int64_t)test_rand(&x);
        sp.type = (uint8_t)(test_rand(&x) % 3);
        sp.layer = (uint8_t)(test_rand(&x) % 2 ? SW_LAYER_HTTP : SW_LAYER_UNKNOWN);
        sp.component = round % 2 ? SW_COMPONENT_HTTP : 5;
        static char method[METHOD_MAX + 16], target[URL_MAX], host[HOST_MAX], hdrs[HDRS_MAX],
            peer[PEER_MAX], op[OP_MAX];
        struct test_parts tp;
        tp.ml = test_fill(&x, method, METHOD_MAX);
        tp.tl = test_fill(&x, target, URL_MAX);
        tp.hl = test_fill(&x, host, HOST_MAX);
        tp.dl = test_rand(&x) % 2 ? test_fill(&x, hdrs, HDRS_MAX) : 0;
        tp.pl = test_fill(&x, peer, PEER_MAX);
        tp.opl = test_fill(&x, op, OP_MAX);
        tp.method = method, tp.target = target, tp.host = host, tp.hdrs = hdrs, tp.peer = peer;
        tp.op = op;
        tp.path_off = (uint16_t)test_rand(&x), tp.path_len = (uint16_t)test_rand(&x);
        tp.op_len = (uint16_t)test_rand(&x), tp.url_len = (uint16_t)test_rand(&x);
        tp.params_len = (uint16_t)test_rand(&x);
        if (test_rand(&x) % 3) {
            var_http(&sp, method, tp.ml, target, tp.tl, tp.path_off, tp.path_len, tp.op_len, host,
                     tp.hl, tp.url_len, tp.params_len, hdrs, tp.dl, peer, tp.pl);
            sp.http_flags = (uint8_t)(test_rand(&x) % 4);
        } else {
            var_named(&sp, op, tp.opl, peer, tp.pl);
            /* A database or cache exit's own tags (sw_trace_db_start_in), after its names. */
            uint16_t nxt = 0;
            sp.xtags_len = test_tags(&x, SPAN_XTAGS(&sp), 2400, round % 4, 1200, &nxt);
            sp.xtags_n = (uint8_t)nxt;
        }
        uint16_t nct = 0;
        sp.ctags_len = test_tags(&x, (uint8_t *)sp.ctags, sizeof(sp.ctags),
                                 (int)(test_rand(&x) % 5), 200, &nct);
        sp.ctags_n = (uint8_t)nct;
        sg.skip_analysis = test_rand(&x) % 2;
        sg.has_ref = test_rand(&x) % 2;
        test_fill_ref(&x, &sg.ref);
        static const int statuses[] = {0, -1, 200, 404, 599, 100000, INT_MAX, INT_MIN};
        struct span_end e = {statuses[test_rand(&x) % 8], test_rand(&x) % 2, NULL, NULL,
                             (int64_t)test_rand(&x)};
        if (test_rand(&x) % 3 == 0) {
            test_fill(&x, kind, sizeof(kind));
            e.kind = kind;
            if (test_rand(&x) % 2) {
                test_fill(&x, msg, sizeof(msg));
                e.msg = msg;
            }
        }
        struct span_out o;
        span_prep(&o, &sg, &sp, &e);
        size_t need = span_size(&sp, &o);
        if (need > ARENA_BYTES) {
            bad++;
            continue;
        }
        memset(fast, 0xa5, sizeof(fast));
        uint8_t *end = span_write(fast, &sg, &sp, &o);
        struct sw_wbuf w;
        sw_wbuf_init(&w, ref, sizeof(ref));
        span_write_checked(&w, &sg, &sp, &tp, &e);
        bool past = false;
        for (size_t i = need; i < sizeof(fast); i++)
            past |= fast[i] != 0xa5;
        if ((size_t)(end - fast) != need || w.overflow || w.len != need ||
            memcmp(fast, ref, need) != 0 || past)
            bad++;
    }
    return bad;
}
#endif

#ifdef SW_TESTING
#include <stdio.h> /* test hooks only: the diagnostics of sw_trace_test_names */

static void span_fill(struct span *sp, const struct sw_req_info *req, int64_t start_ms,
                      const char *url_host, size_t url_host_len, const char *path, size_t plen);

/* The names as the agent built them before record version 2 (the reference). */
static uint16_t make_op_ref(char *op, const struct sw_req_info *req)
{
    size_t plen;
    const char *path = target_path(req->target, req->target_len, &plen);
    if (plen == 0) {
        path = "/";
        plen = 1;
    }
    char tmp[OP_MAX + METHOD_MAX];
    size_t at = 0;
    /* The method as the span keeps it (the http.method tag): cut to METHOD_MAX - 1 bytes, not
     * inside a UTF-8 sequence (only the test's random methods are that long: the HTTP parser
     * knows ASCII methods only). */
    size_t ml = req->method ? fit_len(req->method, req->method_len, METHOD_MAX - 1) : 0;
    if (ml) {
        append(tmp, sizeof(tmp), &at, req->method, ml);
        append(tmp, sizeof(tmp), &at, ":", 1);
    }
    size_t room = sizeof(tmp) - at;
    append(tmp, sizeof(tmp), &at, path, plen < room ? plen : room);
    return copy_cut(op, (size_t)op_threshold() + 1, tmp, at);
}

static uint16_t make_url_ref(char *url, const struct sw_req_info *req, const char *host,
                             size_t host_len)
{
    char tmp[URL_MAX];
    size_t at = 0;
    const char *t = req->target ? req->target : "";
    size_t tn = req->target ? req->target_len : 0;
    bool absolute = tn >= 7 && (memcmp(t, "http://", 7) == 0 || memcmp(t, "https:/", 7) == 0);
    if (!absolute && host && host_len) {
        if (req->tls)
            append(tmp, sizeof(tmp), &at, "https://", 8);
        else
            append(tmp, sizeof(tmp), &at, "http://", 7);
        if (host_len > sizeof(tmp) - at)
            host_len = sizeof(tmp) - at;
        append(tmp, sizeof(tmp), &at, host, host_len);
    }
    size_t room = sizeof(tmp) - at;
    append(tmp, sizeof(tmp), &at, t, tn < room ? tn : room);
    return copy_cut(url, URL_MAX, tmp, at);
}

/* Random request text: letters, '/', '?', '#', '.', UTF-8 lead and continuation bytes. */
static size_t test_text(uint64_t *x, char *dst, size_t max)
{
    static const char alpha[] = "ab/?#.:xyz";
    size_t n = (size_t)(test_rand(x) % 4 == 0 ? max : test_rand(x) % (max + 1));
    for (size_t i = 0; i < n; i++) {
        unsigned r = (unsigned)(test_rand(x) % 16);
        dst[i] = r < 10 ? alpha[r] : r < 13 ? (char)(0x80 + r) : (char)(0xc3 + r);
    }
    return n;
}

/*
 * Test hook (test_trace_writer): `rounds` random root spans of FORM_HTTP (tags, refs, ids,
 * flags) whose record is made both from the prebuilt image (root_image, root_image_end) and by
 * the general writer (seg_hdr_write + span_write, what seg_commit_root writes with an empty
 * arena). Returns the number of records that differ.
 */
SW_STATIC int sw_trace_test_image(uint64_t seed, int rounds);
SW_STATIC int sw_trace_test_image(uint64_t seed, int rounds)
{
    static struct seg sg;
    static uint8_t ref[HDR_MAX + FIXED + VAR_MAX + TAIL_MAX + 64];
    static char method[METHOD_MAX + 16], target[URL_MAX], host[HOST_MAX], hdrs[HDRS_MAX],
        peer[PEER_MAX];
    uint64_t x = seed ? seed : 1;
    int bad = 0;
    for (int round = 0; round < rounds; round++) {
        struct span *sp = &sg.root;
        memset(sp, 0, sizeof(*sp));
        sp->component = SW_COMPONENT_HTTP;
        sp->span_id = 0;
        sp->parent_id = -1;
        sp->start_ms = (int64_t)test_rand(&x);
        sp->type = (uint8_t)(test_rand(&x) % 2 ? SW_SPAN_ENTRY : SW_SPAN_EXIT);
        sp->layer = SW_LAYER_HTTP;
        sp->recorded = true;
        size_t ml = test_fill(&x, method, METHOD_MAX), tl = test_fill(&x, target, URL_MAX);
        size_t hl = test_fill(&x, host, HOST_MAX), pl = test_fill(&x, peer, PEER_MAX);
        size_t dl = test_rand(&x) % 4 ? 0 : test_fill(&x, hdrs, HDRS_MAX);
        var_http(sp, method, ml, target, tl, (uint16_t)test_rand(&x), (uint16_t)test_rand(&x),
                 (uint16_t)test_rand(&x), host, hl, (uint16_t)test_rand(&x),
                 (uint16_t)test_rand(&x), hdrs, dl, peer, pl);
        sp->http_flags = (uint8_t)(test_rand(&x) % 4);
        struct sw_wbuf cw;
        sw_wbuf_init(&cw, sp->ctags, sizeof(sp->ctags));
        for (int t = test_rand(&x) % 3 ? 0 : (int)(test_rand(&x) % 4); t > 0; t--) {
            char k[40], v[100];
            sw_wbuf_str(&cw, k, test_fill(&x, k, sizeof(k)));
            sw_wbuf_str(&cw, v, test_fill(&x, v, sizeof(v)));
            sp->ctags_n++;
        }
        sp->ctags_len = (uint16_t)cw.len;
        sg.skip_analysis = test_rand(&x) % 2;
        sg.has_ref = test_rand(&x) % 2;
        test_fill_ref(&x, &sg.ref);
        sg.tid = (uint32_t)test_rand(&x);
        sg.seg_value = test_rand(&x);
        sg.trace_value = test_rand(&x);
        uint32_t flags = test_rand(&x) % 2 ? SW_REC_SEG_SIZE_LIMITED : 0;
        sw_atomic_store_relaxed(&sg.flags, flags);
        static const int statuses[] = {0, -1, 200, 404, 599, 100000, INT_MAX, INT_MIN};
        struct span_end e = {statuses[test_rand(&x) % 8], test_rand(&x) % 2, NULL, NULL,
                             (int64_t)test_rand(&x)};
        root_image(&sg, sp);
        /* The reference first: root_image_end patches the image in place. */
        struct span_out o;
        span_prep(&o, &sg, sp, &e);
        size_t tlen;
        (void)seg_hdr_size(&sg, &tlen);
        uint8_t *q = seg_hdr_write(ref, &sg, flags, tlen, 1);
        q = span_write(q, &sg, sp, &o);
        size_t want = (size_t)(q - ref), got;
        const uint8_t *img = root_image_end(&sg, sp, &e, &got);
        if (got != want || memcmp(img, ref, want) != 0) {
            if (bad++ < 3)
                fprintf(stderr, "image of %zu bytes != record of %zu\n", got, want);
        }
    }
    return bad;
}

/*
 * Test hook (test_trace_writer): path_scan over padded targets against target_path and
 * sw_config_ignored_path, for random targets (every byte class of a path, '?', '#', '.', '/',
 * lengths around the 16-byte blocks) and ignore lists. Returns the number of differences.
 */
SW_STATIC int sw_trace_test_paths(uint64_t seed, int rounds);
SW_STATIC int sw_trace_test_paths(uint64_t seed, int rounds)
{
    static struct sw_config cfg;
    static char buf[URL_MAX] __attribute__((aligned(16)));
    static const char alpha[] = "ab/?#.PNGpngjs";
    uint64_t x = seed ? seed : 1;
    int bad = 0;
    cfg.ignore_suffix.n = 3;
    snprintf(cfg.ignore_suffix.item[0], SW_CFG_ITEM_MAX, "png");
    snprintf(cfg.ignore_suffix.item[1], SW_CFG_ITEM_MAX, "js");
    snprintf(cfg.ignore_suffix.item[2], SW_CFG_ITEM_MAX, "a");
    sw_cfg_list_index(&cfg.ignore_suffix);
    for (int round = 0; round < rounds; round++) {
        size_t n = (size_t)(test_rand(&x) % 4 ? test_rand(&x) % 40 : test_rand(&x) % (URL_MAX - 1));
        /* Bytes past n (random too) must not count. */
        for (size_t i = 0; i < n + 32 && i < sizeof(buf); i++)
            buf[i] = alpha[test_rand(&x) % (sizeof(alpha) - 1)];
        if (n && test_rand(&x) % 4)
            buf[0] = '/';
        size_t l1, l2;
        const char *suf;
        bool scanned;
        const char *p1 = path_scan(buf, n, true, &l1, &suf, &scanned);
        const char *p2 = target_path(buf, n, &l2);
        bool i1 = scanned ? suf && sw_config_ignored_suffix(&cfg, suf, (size_t)(p1 + l1 - suf))
                          : sw_config_ignored_path(&cfg, p1, l1);
        bool i2 = sw_config_ignored_path(&cfg, p2, l2);
        if (p1 != p2 || l1 != l2 || i1 != i2) {
            if (bad++ < 3)
                fprintf(stderr, "path of '%.*s': %zu %d != %zu %d\n", (int)n, buf, l1, i1, l2, i2);
        }
    }
    return bad;
}

/* A little reader of record.h strs and u16s (test hooks only). */
struct sw_rd {
    const uint8_t *p;
    size_t len, off;
    bool bad;
};
struct sw_rd_str {
    const char *p;
    size_t n;
};

static size_t sw_rd_u16(struct sw_rd *r)
{
    if (r->bad || r->len - r->off < 2) {
        r->bad = true;
        return 0;
    }
    size_t v = (size_t)r->p[r->off] | (size_t)r->p[r->off + 1] << 8;
    r->off += 2;
    return v;
}

static struct sw_rd_str sw_rd_str(struct sw_rd *r)
{
    size_t n = sw_rd_u16(r);
    if (r->bad || r->len - r->off < n) {
        r->bad = true;
        return (struct sw_rd_str){"", 0};
    }
    struct sw_rd_str v = {(const char *)r->p + r->off, n};
    r->off += n;
    return v;
}

/*
 * Test hook (test_trace_writer): the operation name and url that the reporter makes from a span
 * filled by span_fill (record.h's sw_rec_http_op / sw_rec_http_url over the span's parts and
 * lengths) against the names as the agent built them before (the references above), for random
 * methods, targets (absolute or not, long, multi-byte; at most the 1023 bytes the HTTP parser
 * captures), hosts (at most the 255 bytes of a captured Host) and thresholds. Returns the
 * number of differences.
 */
SW_STATIC int sw_trace_test_names(uint64_t seed, int rounds);
SW_STATIC int sw_trace_test_names(uint64_t seed, int rounds)
{
    static struct sw_config cfg;
    static char target[URL_MAX - 1], host[HOST_MAX - 1], method[40];
    static char a[URL_MAX + 8], b[URL_MAX + 8];
    static struct span sp;
    const struct sw_config *saved = g_cfg;
    g_cfg = &cfg;
    uint64_t x = seed ? seed : 1;
    int bad = 0;
    for (int round = 0; round < rounds; round++) {
        static const int th[] = {0, 1, 2, 5, 16, 17, 150, 254, 255, 256, 1000, -3};
        cfg.operation_name_threshold = th[test_rand(&x) % 12];
        lim_make();
        struct sw_req_info req;
        memset(&req, 0, sizeof(req));
        size_t tn = test_text(&x, target, sizeof(target));
        if (tn >= 8 && test_rand(&x) % 3 == 0)
            memcpy(target, test_rand(&x) % 2 ? "http://h" : "https://", 8);
        req.target = test_rand(&x) % 10 ? target : NULL;
        req.target_len = req.target ? tn : 0;
        req.method_len = test_text(&x, method, test_rand(&x) % 2 ? 7 : sizeof(method));
        req.method = test_rand(&x) % 10 ? method : NULL;
        size_t hn = test_text(&x, host, sizeof(host));
        const char *h = test_rand(&x) % 5 ? host : NULL;
        req.tls = test_rand(&x) % 4 == 0;
        static char peer[PEER_MAX];
        req.peer_len = test_text(&x, peer, test_rand(&x) % 2 ? 20 : sizeof(peer) - 1);
        req.peer = test_rand(&x) % 5 ? peer : NULL;
        if (test_rand(&x) % 2 && tn) {
            target[0] = '/'; /* origin-form: the usual request (span_fill's first way) */
            if (req.method_len > 5 && test_rand(&x) % 2)
                req.method_len = 3;
        }
        memset(&sp, 0, sizeof(sp));
        sp.type = SW_SPAN_ENTRY;
        span_fill(&sp, &req, 1, h, h ? hn : 0, NULL, 0);
        /* The parts as the record carries them (record.h order), read back from var. */
        struct sw_rd r = {SPAN_VAR(&sp), sp.var_len, 0, false};
        struct sw_rd_str m = sw_rd_str(&r), t = sw_rd_str(&r);
        size_t path_off = sw_rd_u16(&r), path_len = sw_rd_u16(&r), op_len = sw_rd_u16(&r);
        struct sw_rd_str hs = sw_rd_str(&r);
        size_t url_len = sw_rd_u16(&r);
        (void)sw_rd_u16(&r); /* params */
        (void)sw_rd_str(&r); /* headers */
        (void)sw_rd_str(&r); /* peer */
        if (r.bad || r.off != r.len)
            bad++;
        size_t n1 = sw_rec_http_op(a, sizeof(a), m.p, m.n, t.p + path_off, path_len, op_len);
        size_t n2 = make_op_ref(b, &req);
        if (n1 != n2 || path_off + path_len > t.n || memcmp(a, b, n1) != 0) {
            if (bad++ < 3)
                fprintf(stderr, "op %zu '%.*s' != %zu '%.*s' (threshold %d)\n", n1, (int)n1, a, n2,
                        (int)n2, b, cfg.operation_name_threshold);
        }
        n1 = url_len ? sw_rec_http_url(a, sizeof(a), sp.http_flags, hs.p, hs.n, t.p, t.n, url_len)
                     : 0;
        n2 = make_url_ref(b, &req, h, hn);
        if (n1 != n2 || memcmp(a, b, n1) != 0) {
            if (bad++ < 3)
                fprintf(stderr, "url %zu '%.*s' != %zu '%.*s'\n", n1, (int)n1, a, n2, (int)n2, b);
        }
    }
    g_cfg = saved;
    if (g_cfg)
        lim_make();
    return bad;
}
#endif

/* Writes the segment record (header + arena) into the ring. The count is 0: exclusive. */
static void seg_commit(struct seg *sg)
{
    uint32_t flags = sw_atomic_load_relaxed(&sg->flags);
    uint32_t nspans = sw_atomic_load_relaxed(&sg->span_count);
    uint32_t body = sw_atomic_load_relaxed(&sg->arena_off);
    if (nspans == 0)
        return;
    if (flags & SEG_BROKEN) {
        sw_atomic_add_relaxed(&g_dropped, 1);
        return;
    }
    struct sw_ring *r = ring_get();
    if (!r) {
        sw_atomic_add_relaxed(&g_dropped, 1);
        return;
    }
    size_t tl;
    size_t len = seg_hdr_size(sg, &tl) + body;
    uint8_t *p = sw_ring_reserve(r, (uint32_t)len, SW_REC_SEGMENT);
    if (!p) {
        sw_atomic_add_relaxed(&g_dropped, 1);
        return;
    }
    /* The exact size was reserved: unchecked writes (see span_write). */
    uint8_t *q = seg_hdr_write(p, sg, flags, tl, nspans);
    memcpy(q, sg->arena, body);
    sw_ring_commit(r, p);
    sw_atomic_add_relaxed(&g_committed, 1);
    /* The root span ended just now (a clock reading of the connection layer): no clock read. */
    maybe_spawn(sw_atomic_load_relaxed(&sg->root_end_ms));
}

/*
 * The root span (span 0, recorded) of `sg` finished and took the segment's last count (no
 * exit is open or can join): the record is written straight into the ring, the root after the
 * spans already in the arena (usually none), without going through the arena itself.
 */
static void seg_commit_root(struct seg *sg, const struct span *sp, const struct span_end *e)
{
    uint32_t flags = sw_atomic_load_relaxed(&sg->flags);
    uint32_t nspans = sw_atomic_load_relaxed(&sg->span_count);
    uint32_t body = sw_atomic_load_relaxed(&sg->arena_off);
    if (SW_UNLIKELY(flags & SEG_BROKEN)) {
        sw_atomic_add_relaxed(&g_dropped, 1);
        return;
    }
    struct sw_ring *r = ring_get();
    if (SW_UNLIKELY(!r)) {
        sw_atomic_add_relaxed(&g_dropped, 1);
        return;
    }
    struct span_out o;
    span_prep(&o, sg, sp, e);
    size_t need = span_size(sp, &o), tl;
    size_t hdr = seg_hdr_size(sg, &tl);
    uint8_t *p = sw_ring_reserve(r, (uint32_t)(hdr + body + need), SW_REC_SEGMENT);
    if (SW_UNLIKELY(!p)) {
        sw_atomic_add_relaxed(&g_dropped, 1);
        return;
    }
    uint8_t *q = seg_hdr_write(p, sg, flags, tl, nspans + 1);
    if (body) {
        memcpy(q, sg->arena, body);
        q += body;
    }
    uint8_t *end = span_write(q, sg, sp, &o);
    if (SW_UNLIKELY((size_t)(end - q) != need)) {
        /* Cannot happen (test_trace_writer): the space is reserved, so make it a record the
         * reporter refuses (an unknown version) rather than a wrong one. */
        p[0] = 0xff;
        sw_atomic_add_relaxed(&g_dropped, 1);
    } else {
        sw_atomic_add_relaxed(&g_committed, 1);
    }
    sw_ring_commit(r, p);
    maybe_spawn(e->end_ms);
}

/* The usual end of a traced request: the root's prebuilt record goes into the ring (inline in
 * span_end_in; seg_commit_image for span_end_rest). */
static inline __attribute__((always_inline)) void
seg_commit_image_in(struct seg *sg, struct span *sp, const struct span_end *e)
{
    struct sw_ring *r = ring_get();
    if (SW_UNLIKELY(!r)) {
        sw_atomic_add_relaxed(&g_dropped, 1);
        return;
    }
    size_t len;
    const uint8_t *rec = root_image_end(sg, sp, e, &len);
    if (SW_UNLIKELY(!sw_ring_put_segment(r, rec, (uint32_t)len))) {
        sw_atomic_add_relaxed(&g_dropped, 1);
        return;
    }
    sw_atomic_add_relaxed(&g_committed, 1);
    maybe_spawn(e->end_ms);
}

SW_HOT static void seg_commit_image(struct seg *sg, struct span *sp, const struct span_end *e)
{
    seg_commit_image_in(sg, sp, e);
}

static void seg_complete(uint32_t slot)
{
    struct seg *sg = &g_segs[slot];
    if (sg->sampled || (sw_atomic_load_relaxed(&sg->flags) & SEG_KEPT))
        seg_commit(sg);
    pool_free(&g_seg_pool, slot);
}

/* Takes the last count of segment `slot` (generation `gen`) when it is the only one left: after
 * this nobody can join the segment. False when another count is held. */
static bool seg_take_last(uint32_t slot, uint32_t gen)
{
    uint64_t v = (uint64_t)gen << 32 | 1u;
    return sw_atomic_cas_acq_rel(&g_seg_live[slot], &v, (uint64_t)gen << 32);
}

/* ---------------------------------------------------------------- span life */

/* The fields every claim of a span resets (the rest is written before they are read). */
static inline void span_reset(struct span *sp)
{
    sp->close_with = 0;
    sp->layer = SW_LAYER_HTTP;
    sp->form = FORM_HTTP;
    sp->xslot = 0;
    sp->xgen = 0;
    sp->ctags_len = 0;
    sp->ctags_n = 0;
    sp->component = SW_COMPONENT_HTTP;
    sp->xtags_len = 0;
    sp->xtags_n = 0;
    sp->hdr_len = 0; /* no prebuilt record (root_image) */
    sp->rpc = false;
    /* exec_exits are 0 unless a fork attached one (exec_any, see span_end). */
    if (SW_UNLIKELY(sw_atomic_load_relaxed(&sp->exec_any))) {
        for (uint32_t i = 0; i < EXEC_EXITS; i++)
            sw_atomic_store_relaxed(&sp->exec_exits[i], 0);
        sw_atomic_store_relaxed(&sp->exec_any, 0);
    }
}

/*
 * Claims a segment slot and resets its counters, and its root span (span 0, parent -1),
 * whose handle goes to *root; not yet published. -1: pool exhausted.
 */
static inline __attribute__((always_inline)) int seg_claim_in(uint64_t *root)
{
    int slot = pool_claim(&g_seg_pool);
    if (slot < 0)
        return -1;
    struct seg *sg = &g_segs[slot];
    sg->sampled = false;
    sg->keep = false;
    sg->skip_analysis = false;
    sg->has_ref = false; /* ref is read only when has_ref is set (after sw_sw8_decode) */
    sg->corr_len = 0;
    sw_atomic_store_relaxed(&sg->next_span_id, 1);
    sw_atomic_store_relaxed(&sg->arena_off, 0);
    sw_atomic_store_relaxed(&sg->span_count, 0);
    sw_atomic_store_relaxed(&sg->flags, 0);
    sw_atomic_store_relaxed(&sg->root_end_ms, 0);
    struct span *sp = &sg->root;
    /* The root span is claimed with its segment only: their generations stay equal. */
    uint32_t gen = next_gen(&sg->gen);
    sp->gen = gen;
    *root = (uint64_t)gen << 32 | ROOT_SLOT(slot);
    span_reset(sp);
    sp->span_id = 0;
    sp->parent_id = -1;
    return slot;
}

SW_HOT static int seg_claim(uint64_t *root)
{
    return seg_claim_in(root);
}

/* New ids for segment `sg` (a new trace id too, unless it continues its ref's trace). As
 * the Java agent does, the trace id is drawn first. */
static inline void seg_new_ids(struct seg *sg, int64_t ms)
{
    if (sg->has_ref) {
        sg->seg_value = sw_id_next(ms, &sg->tid);
    } else {
        sg->trace_value = sw_id_next2(ms, &sg->tid);
        sg->seg_value = sg->trace_value + 1;
    }
}

/* The text of the segment's trace id and segment id (SW_ID_MAX bytes each, NUL-terminated),
 * for an outgoing sw8 or an exec context. */
static void seg_id_texts(const struct seg *sg, char *trace_id, char *seg_id)
{
    if (sg->has_ref)
        copy_cut(trace_id, SW_ID_MAX, sg->ref.trace_id, sg->ref.len[0]);
    else if (!sw_id_format(trace_id, SW_ID_MAX, sg->tid, sg->trace_value))
        trace_id[0] = '\0';
    if (!sw_id_format(seg_id, SW_ID_MAX, sg->tid, sg->seg_value))
        seg_id[0] = '\0';
}

static void uuid_b64_make(void)
{
    char pre[SW_ID_UUID_LEN + 1];
    memcpy(pre, sw_id_process_uuid(), SW_ID_UUID_LEN);
    pre[SW_ID_UUID_LEN] = '.';
    _Static_assert((SW_ID_UUID_LEN + 1) % 3 == 0 && (SW_ID_UUID_LEN + 1) / 3 * 4 == 44, "uuid");
    g_uuid_b64_ok = sw_b64_encode(pre, sizeof(pre), g_uuid_b64, sizeof(g_uuid_b64)) == 44;
}

/* The base64 of the id <uuid>.<tid>.<value> of this process (sw8's trace and segment id
 * fields), in out[(SW_ID_MAX / 3 + 1) * 4]; returns its length, 0 when it cannot be made. */
SW_HOT static size_t id_b64(char *out, uint32_t tid, uint64_t value)
{
    char id[SW_ID_MAX];
    if (SW_LIKELY(g_uuid_b64_ok)) {
        char rest[32];
        size_t n = sw_rec_put_u64(rest, tid);
        rest[n++] = '.';
        n += sw_rec_put_u64(rest + n, value);
        memcpy(out, g_uuid_b64, sizeof(g_uuid_b64));
        long k = sw_b64_encode(rest, n, out + 44, (SW_ID_MAX / 3 + 1) * 4 - 44);
        return k > 0 ? 44 + (size_t)k : 0;
    }
    size_t n = sw_id_format(id, sizeof(id), tid, value);
    long k = n ? sw_b64_encode(id, n, out, (SW_ID_MAX / 3 + 1) * 4) : -1;
    return k > 0 ? (size_t)k : 0;
}

/* The operation name of a sampled segment's root span (the endpoint its exits name in sw8
 * field 7), NUL-terminated in out[OP_MAX]; returns its length. */
SW_HOT static size_t seg_endpoint(const struct seg *sg, char *out)
{
    const struct span *r = &sg->root;
    size_t n;
    const char *v = (const char *)SPAN_VAR(r);
    if (r->form == FORM_HTTP)
        n = sw_rec_http_op(out, OP_MAX - 1, v + 2, r->method_len, v + r->target_off + r->path_off,
                           r->path_len, r->op_len);
    else
        n = copy_cut(out, OP_MAX, v + 2, r->op_len);
    out[n] = '\0';
    return n;
}

/* Makes a claimed segment joinable, with one count held by its root span. */
static void seg_publish(uint32_t slot)
{
    sw_atomic_store_release(&g_seg_live[slot], (uint64_t)g_segs[slot].gen << 32 | 1u);
}

/* Claims a span slot of the pool; returns its index or -1 and sets *h. */
static int span_claim(uint64_t *h)
{
    int slot = pool_claim(&g_span_pool);
    if (slot < 0)
        return -1;
    uint32_t gen = next_gen(&g_spans[slot].gen);
    *h = (uint64_t)gen << 32 | (uint32_t)slot;
    span_reset(&g_spans[slot]);
    return slot;
}

/*
 * span_claim for an unsampled entry without a segment (SEG_NONE), inline and without
 * span_reset: nothing reads the fields it resets of such a span (span_end_in frees it at once,
 * reap and sw_trace_before_fork pass it over: no segment), and the next span_claim of the
 * slot resets them.
 */
static inline __attribute__((always_inline)) int span_claim_none(uint64_t *h)
{
    int slot = pool_claim(&g_span_pool);
    if (SW_UNLIKELY(slot < 0))
        return -1;
    uint32_t gen = next_gen(&g_spans[slot].gen);
    *h = (uint64_t)gen << 32 | (uint32_t)slot;
    return slot;
}

/*
 * SEG_NONE as the segment of an open span: an unsampled (or ignored) entry with no
 * sw8-correlation to pass on. Exits made while serving it need to know only that it is
 * unsampled (they send nothing and record nothing), so it has no segment: no segment slot,
 * no ids, no names. seg_join() refuses it (slot out of range) and callers that must tell it
 * from "no request" use unsampled_entry().
 */
#define SEG_NONE UINT64_MAX

static void span_publish_none(int slot, uint64_t h)
{
    struct span_hot *hot = &g_span_hot[slot];
    sw_atomic_store_relaxed(&hot->seg, SEG_NONE);
    sw_atomic_store_release(&hot->state, h);
}

/* True when `h` is an open span without a segment (SEG_NONE). */
static bool unsampled_entry(uint64_t h)
{
    int s = handle_slot(h);
    if (s < 0)
        return false;
    struct span_hot *hot = &g_span_hot[s];
    if (sw_atomic_load_acquire(&hot->state) != h)
        return false;
    uint64_t ref = sw_atomic_load_acquire(&hot->seg);
    return ref == SEG_NONE && sw_atomic_load_acquire(&hot->state) == h;
}

static void span_publish(int slot, uint64_t h, uint32_t seg_slot)
{
    struct span_hot *hot = &g_span_hot[slot];
    sw_atomic_store_relaxed(&hot->seg, (uint64_t)g_segs[seg_slot].gen << 32 | seg_slot);
    sw_atomic_store_release(&hot->state, h);
}

/* The peer cut to plugin.peer_max_length: the same bytes go into the span and sw8 field 8. */
static uint16_t copy_peer(char *peer, const struct sw_req_info *req)
{
    size_t cap = PEER_MAX;
    if (g_cfg->peer_max_length > 0 && (size_t)g_cfg->peer_max_length + 1 < cap)
        cap = (size_t)g_cfg->peer_max_length + 1;
    return copy_cut(peer, cap, req->peer, req->peer ? req->peer_len : 0);
}

/*
 * correlation.auto_tag_keys: the entry span gets a tag `key=value` for each item of the
 * (filtered) incoming sw8-correlation whose key is listed, as the Java agent tags the span
 * that extracts the correlation context. Items that do not fit CTAGS_MAX are left out.
 */
static void span_auto_tags(struct span *sp, const struct seg *sg)
{
    const struct sw_cfg_list *keys = &g_cfg->correlation_auto_tag_keys;
    if (keys->n <= 0 || !sg->corr_len)
        return;
    struct sw_wbuf w;
    sw_wbuf_init(&w, sp->ctags, sizeof(sp->ctags));
    const char *p = sg->corr, *end = sg->corr + sg->corr_len;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *item_end = comma ? comma : end;
        const char *colon = memchr(p, ':', (size_t)(item_end - p));
        char k[SW_CFG_ITEM_MAX], v[SW_CORR_MAX];
        long kl = colon ? sw_b64_decode(p, (size_t)(colon - p), k, sizeof(k)) : -1;
        long vl =
            colon ? sw_b64_decode(colon + 1, (size_t)(item_end - colon - 1), v, sizeof(v)) : -1;
        for (int i = 0; kl > 0 && vl >= 0 && i < keys->n; i++) {
            if (strlen(keys->item[i]) != (size_t)kl || memcmp(keys->item[i], k, (size_t)kl) != 0)
                continue;
            size_t at = w.len;
            sw_wbuf_str(&w, k, (size_t)kl);
            sw_wbuf_str(&w, v, (size_t)vl);
            if (w.overflow) {
                w.len = at;
                w.overflow = false;
            } else {
                sp->ctags_n++;
            }
            break;
        }
        p = item_end + 1;
    }
    sp->ctags_len = (uint16_t)w.len;
}

/* Writes the operation name "EXEC:<prog>" of an EXEC span (FORM_NAMED, into its target
 * buffer) cut to agent.operation_name_threshold; returns its length. */
static uint16_t exec_op(char *out, const char *prog, size_t n)
{
    char op[OP_MAX];
    size_t at = 0;
    append(op, sizeof(op), &at, "EXEC:", 5);
    append(op, sizeof(op), &at, prog, n < sizeof(op) - at ? n : sizeof(op) - at);
    return copy_cut(out, (size_t)op_threshold() + 1, op, at);
}

/*
 * Fills the request-derived fields of an HTTP span: its request's parts are written once into
 * its names (var) and the lengths of the names made of them computed (the reporter puts the
 * names together, see record.h). `path`: target_path() of the target, or NULL (computed here).
 */
static SW_NOINLINE void span_fill_any(struct span *sp, const struct sw_req_info *req,
                                      const char *url_host, size_t url_host_len, const char *path,
                                      size_t plen);

static inline __attribute__((always_inline)) void
span_fill_in(struct span *sp, const struct sw_req_info *req, int64_t start_ms, const char *url_host,
             size_t url_host_len, const char *path, size_t plen)
{
    sp->start_ms = start_ms;
    if (!path)
        path = target_path(req->target, req->target_len, &plen);
    /*
     * The usual request: a method, an origin-form target whose path begins it, a Host, a peer,
     * no http.headers or http.params, nothing to cut. The same bytes as span_fill_any with no
     * length arithmetic beyond the sums (test_trace_writer's names test takes both ways).
     */
    const char *t = req->target;
    size_t ml = req->method_len, tn = req->target_len, hl = url_host_len, pl = req->peer_len;
    size_t op_len = ml + 1 + plen;
    if (SW_LIKELY(req->method && ml - 1 < METHOD_MAX - 1 && t && tn - 1 < URL_MAX - 8 - HOST_MAX &&
                  t[0] == '/' && path == t && plen && url_host && hl - 1 < HOST_MAX - 1 &&
                  req->peer && pl <= g_lim.peer && !req->headers_tag_len && op_len <= g_lim.op &&
                  !g_lim.params[sp->type == SW_SPAN_ENTRY])) {
        /* "https://" is one byte longer: the bounds above leave room for it (HTTPS, issue 35). */
        size_t sl = req->tls ? 8 : 7;
        var_http(sp, req->method, ml, t, tn, 0, plen, op_len, url_host, hl, sl + hl + tn, 0, NULL,
                 0, req->peer, pl);
        sp->http_flags = (uint8_t)(SW_REC_HTTP_URL_HOST | (req->tls ? SW_REC_HTTP_TLS : 0));
        return;
    }
    span_fill_any(sp, req, url_host, url_host_len, path, plen);
}

/* span_fill_in out of line (the callers other than the usual entry). */
SW_HOT static void span_fill(struct span *sp, const struct sw_req_info *req, int64_t start_ms,
                             const char *url_host, size_t url_host_len, const char *path,
                             size_t plen)
{
    span_fill_in(sp, req, start_ms, url_host, url_host_len, path, plen);
}

/* span_fill for any request (cuts, absolute-form targets, http.headers, http.params ...). */
static SW_NOINLINE void span_fill_any(struct span *sp, const struct sw_req_info *req,
                                      const char *url_host, size_t url_host_len, const char *path,
                                      size_t plen)
{
    const char *t = req->target ? req->target : "";
    size_t tn = req->target ? req->target_len : 0;
    size_t ml, hl, pl;
    ml = req->method ? fit_len(req->method, req->method_len, METHOD_MAX - 1) : 0;
    size_t tl = fit_len(t, tn, URL_MAX - 1);
    /* The path is in the target (target_path); the HTTP parser keeps at most URL_MAX - 1 bytes
     * of a target, so the cut above never shortens it in practice. */
    size_t off = path >= t && path <= t + tl ? (size_t)(path - t) : tl;
    if (plen > tl - off)
        plen = tl - off;
    size_t op_len = op_len_of(req->method, ml, t + off, plen);
    uint8_t flags;
    size_t url_len = url_len_of(t, tl, url_host, url_host_len, req->tls, &flags);
    hl = (flags & SW_REC_HTTP_URL_HOST) ? fit_len(url_host, url_host_len, HOST_MAX - 1) : 0;
    size_t dl = 0;
    if (SW_UNLIKELY(req->headers_tag && req->headers_tag_len)) {
        size_t hcap = HDRS_MAX;
        if (g_cfg->http_headers_length_threshold > 0 &&
            (size_t)g_cfg->http_headers_length_threshold + 1 < hcap)
            hcap = (size_t)g_cfg->http_headers_length_threshold + 1;
        dl = fit_len(req->headers_tag, req->headers_tag_len, hcap - 1);
    }
    /* http.params (plugin.tomcat / plugin.httpclient .collect_http_params): the query string
     * of the target, without the `?` and any fragment, cut to http_params_length_threshold. The
     * record carries its length only: the bytes are the target's after its first '?'. */
    size_t params_len = 0;
    bool want = sp->type == SW_SPAN_ENTRY ? g_cfg->collect_http_params_entry
                                          : g_cfg->collect_http_params_exit;
    const char *q = want && tl ? memchr(t, '?', tl) : NULL;
    if (SW_UNLIKELY(q != NULL)) {
        size_t qn = tl - (size_t)(q - t) - 1;
        const char *f = memchr(q + 1, '#', qn);
        if (f)
            qn = (size_t)(f - (q + 1));
        size_t pcap = PARAMS_MAX;
        if (g_cfg->http_params_length_threshold > 0 &&
            (size_t)g_cfg->http_params_length_threshold + 1 < pcap)
            pcap = (size_t)g_cfg->http_params_length_threshold + 1;
        params_len = fit_len(q + 1, qn, pcap - 1);
    }
    /* The peer cut to plugin.peer_max_length: the same bytes go into the span and sw8 field 8. */
    size_t pcap = PEER_MAX;
    if (g_cfg->peer_max_length > 0 && (size_t)g_cfg->peer_max_length + 1 < pcap)
        pcap = (size_t)g_cfg->peer_max_length + 1;
    pl = req->peer ? fit_len(req->peer, req->peer_len, pcap - 1) : 0;
    var_http(sp, req->method, ml, t, tl, off, plen, op_len, url_host, hl, url_len, params_len,
             req->headers_tag, dl, req->peer, pl);
    sp->http_flags = flags;
}

static void exec_exit_close(uint64_t h, int64_t end_ms);

static void span_end_rest(uint64_t h, int slot, const struct span_end *e);
static void keep_at_end(struct seg *sg, struct span *sp, bool root, const struct span_end *e);

/* Ends open span `h`: records it and drops its segment count. Stale handles do nothing.
 * Inline in the finishing API functions, so their struct span_end is made only when needed. */
static inline __attribute__((always_inline)) void span_end_in(uint64_t h, const struct span_end *e)
{
    uint32_t slot = (uint32_t)h & ~SW_TRACE_KEEP_BIT; /* handle_slot, unsigned */
    if (SW_UNLIKELY(h == 0 || slot >= ALL_SPAN_SLOTS || !g_ready))
        return;
    struct span_hot *hot = &g_span_hot[slot];
    uint64_t expect = h;
    if (!atomic_compare_exchange_strong_explicit(&hot->state, &expect, 0, memory_order_seq_cst,
                                                 memory_order_relaxed))
        return;
    /*
     * The usual end of a traced request: the root entry of a recorded segment with its image,
     * no error log, no EXEC exit attached (exec_any, read after the state CAS as span_end_rest
     * reads it), and nothing else open in the segment. When the segment's last count cannot be
     * taken, span_end_rest does the rest (its tls_forget again finds nothing to do).
     */
    if ((uint32_t)slot >= SPAN_SLOTS) {
        uint32_t seg_slot = (uint32_t)slot - SPAN_SLOTS;
        struct seg *sg = &g_segs[seg_slot];
        struct span *sp = &sg->root;
        /* A root has an image (hdr_len) only when recorded (root_image's callers). */
        if (SW_LIKELY(sp->type == SW_SPAN_ENTRY && sp->hdr_len && !e->kind &&
                      !atomic_load_explicit(&sp->exec_any, memory_order_seq_cst))) {
            tls_forget(h);
            if (SW_LIKELY(seg_take_last(seg_slot, sg->gen))) {
                if (SW_LIKELY(sw_atomic_load_relaxed(&sg->arena_off) == 0))
                    seg_commit_image_in(sg, sp, e);
                else
                    seg_commit_root(sg, sp, e); /* spans of exits went before it */
                pool_free(&g_seg_pool, seg_slot);
                return;
            }
        } else if (sp->type == SW_SPAN_EXIT && sp->hdr_len && !e->kind) {
            /* A root database or cache exit with its image (db_image): no tls entry, no EXEC
             * exit, nothing to close with it, never keepable. */
            if (SW_LIKELY(seg_take_last(seg_slot, sg->gen))) {
                if (SW_LIKELY(sw_atomic_load_relaxed(&sg->arena_off) == 0))
                    seg_commit_image_in(sg, sp, e);
                else
                    seg_commit_root(sg, sp, e);
                pool_free(&g_seg_pool, seg_slot);
                return;
            }
        } else if (sg->keep && !sp->recorded && e->status <= 0 && !e->kind &&
                   !atomic_load_explicit(&sp->exec_any, memory_order_seq_cst)) {
            /* A keepable request not kept whose end says nothing (an unfollowed response:
             * keep_at_end would decide nothing): freed when nothing else of it is open. */
            tls_forget(h);
            if (SW_LIKELY(seg_take_last(seg_slot, sg->gen))) {
                pool_free(&g_seg_pool, seg_slot);
                return;
            }
        }
    } else if (SW_LIKELY(sw_atomic_load_relaxed(&hot->seg) == SEG_NONE)) {
        /* An unsampled entry without a segment: it holds nothing else (no exec exits: those
         * need a segment to join; no close_with: only EXEC exits have one). */
        tls_forget(h);
        pool_free(&g_span_pool, slot);
        return;
    }
    span_end_rest(h, (int)slot, e);
}

/* span_end_in out of line, for the other callers. */
SW_HOT static void span_end(uint64_t h, const struct span_end *e)
{
    span_end_in(h, e);
}

/* span_end after its state CAS: any span, any end. */
SW_HOT static SW_NOINLINE void span_end_rest(uint64_t h, int slot, const struct span_end *e)
{
    struct span_hot *hot = &g_span_hot[slot];
    struct span *sp = span_at(slot);
    bool root = (uint32_t)slot >= SPAN_SLOTS;
    uint32_t seg_slot;
    if (root) {
        seg_slot = (uint32_t)slot - SPAN_SLOTS; /* a root span's segment is its own slot */
    } else {
        /* Not SEG_NONE: span_end_in ends a span without a segment itself. */
        seg_slot = (uint32_t)sw_atomic_load_relaxed(&hot->seg);
    }
    struct seg *sg = &g_segs[seg_slot];
    if (sp->type == SW_SPAN_ENTRY)
        tls_forget(h);
    if (SW_UNLIKELY(sg->keep))
        keep_at_end(sg, sp, root, e);
    uint64_t close_with = sp->close_with;
    /*
     * EXEC exits attached by forks (sw_trace_before_fork). The attacher sets exec_any, CASes
     * a word from 0 and then checks that this span is still open; this span cleared its state
     * (above) before reading exec_any and the words. All of it is seq_cst, so at least one
     * side sees the other: either exec_any and the word are read non-zero here and the word
     * is taken with an exchange, or the attacher sees the span closed and ends its exit
     * itself. A plain load of exec_any keeps the usual case (no fork) to one load.
     */
    uint64_t xexits[EXEC_EXITS];
    bool any_exec = false;
    if (sp->type == SW_SPAN_ENTRY &&
        SW_UNLIKELY(atomic_load_explicit(&sp->exec_any, memory_order_seq_cst))) {
        for (uint32_t i = 0; i < EXEC_EXITS; i++) {
            uint64_t v = atomic_load_explicit(&sp->exec_exits[i], memory_order_seq_cst);
            xexits[i] =
                v ? atomic_exchange_explicit(&sp->exec_exits[i], 0, memory_order_seq_cst) : 0;
            any_exec |= xexits[i] != 0;
        }
    }
    if (root && sp->recorded && seg_take_last(seg_slot, sg->gen)) {
        /* Nothing else is open in its segment (the usual end of a traced request); nothing
         * reads root_end_ms of a segment without open spans, so it is not stored. */
        if (SW_LIKELY(sp->hdr_len && !e->kind && sw_atomic_load_relaxed(&sg->arena_off) == 0))
            seg_commit_image(sg, sp, e);
        else
            seg_commit_root(sg, sp, e);
        pool_free(&g_seg_pool, seg_slot);
    } else {
        /* Before the count is dropped: the segment's completer and reap read it. */
        if (root)
            sw_atomic_store_relaxed(&sg->root_end_ms, e->end_ms ? e->end_ms : 1);
        if (sp->recorded)
            span_record(sg, sp, e);
        span_free(slot); /* a root span stays with its segment until the segment completes */
        seg_put(seg_slot);
    }
    /* EXEC exits of forks made while serving this request end with it (they hold counts). */
    for (uint32_t i = 0; any_exec && i < EXEC_EXITS; i++)
        if (xexits[i])
            exec_exit_close(xexits[i], e->end_ms);
    if (close_with) {
        /* The EXEC entry of an exec'ed child's exit ends with it (not an error itself). */
        struct span_end ee = {0, false, NULL, NULL, e->end_ms};
        span_end(close_with, &ee);
    }
}

/* Frees exec slot `xs` if it still belongs to claim `gen` (whatever its state). */
static void xslot_free(uint32_t xs, uint64_t gen)
{
    struct exec_slot *x = &g_xslots[xs];
    uint64_t v = sw_atomic_load_acquire(&x->state);
    while (v >> 2 == gen && (v & 3u) != XS_FREE)
        if (sw_atomic_cas_acq_rel(&x->state, &v, gen << 2 | XS_FREE))
            break;
}

/* Maps the exec slots if no fork did yet (two forking threads: one mapping wins). */
static void xslots_map(void)
{
    if (g_xslots)
        return;
    void *x = mmap(NULL, sizeof(struct exec_slot) * EXEC_SLOTS, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (x == MAP_FAILED)
        return; /* no EXEC exit span for this fork + exec (the entry is the parent); next fork */
    struct exec_slot *none = NULL;
    if (!atomic_compare_exchange_strong_explicit(&g_xslots_p, &none, (struct exec_slot *)x,
                                                 memory_order_acq_rel, memory_order_acquire))
        munmap(x, sizeof(struct exec_slot) * EXEC_SLOTS);
}

/* Claims a free exec slot; returns its index and sets *gen, or -1 (all in use). */
static int xslot_claim(uint64_t *gen)
{
    xslots_map();
    if (!g_xslots)
        return -1;
    for (uint32_t i = 0; i < EXEC_SLOTS; i++) {
        struct exec_slot *x = &g_xslots[i];
        uint64_t v = sw_atomic_load_relaxed(&x->state);
        if ((v & 3u) != XS_FREE)
            continue;
        uint64_t g = (v >> 2) + 1;
        if (sw_atomic_cas_acq_rel(&x->state, &v, g << 2 | XS_CLAIMED)) {
            *gen = g;
            return (int)i;
        }
    }
    return -1;
}

/*
 * Ends the EXEC exit span `h` of a fork (its entry ended at end_ms): named after the program
 * the child exec'ed, or not recorded when the child did not exec (yet).
 */
static void exec_exit_close(uint64_t h, int64_t end_ms)
{
    int s = handle_slot(h);
    if (s < 0 || !span_open(h))
        return;
    struct span *sp = span_at(s);
    if (sp->xslot) {
        uint32_t xs = sp->xslot - 1;
        struct exec_slot *x = &g_xslots[xs];
        if (sw_atomic_load_acquire(&x->state) == (sp->xgen << 2 | XS_DONE) && x->len > 5 &&
            x->len < PEER_MAX) {
            char peer[PEER_MAX], op[OP_MAX];
            size_t pl = copy_cut(peer, PEER_MAX, x->addr, x->len);
            var_named(sp, op, exec_op(op, peer + 5, pl - 5u), peer, pl);
        } else {
            sp->recorded = false;
        }
        xslot_free(xs, sp->xgen);
    }
    struct span_end e = {0, false, NULL, NULL, end_ms};
    span_end(h, &e);
}

/*
 * Slow path, run when a pool is exhausted (at most once per REAP_EVERY_MS of the callers'
 * clock): ends every span still open REAP_AFTER_MS after its segment's root span finished.
 * Safe against the rightful finisher: span_end's CAS on the state lets exactly one proceed.
 * A span whose state is still its handle holds a count on its segment, so the segment slot
 * read here is that span's segment (or the CAS fails because the span ended meanwhile).
 */
static SW_NOINLINE void reap(int64_t now)
{
    int64_t last = sw_atomic_load_relaxed(&g_last_reap_ms);
    if (last && now >= last && now - last < REAP_EVERY_MS)
        return;
    if (!sw_atomic_cas_acq_rel(&g_last_reap_ms, &last, now))
        return;
    for (uint32_t i = 0; i < g_span_pool.nslots; i++) {
        struct span_hot *hot = &g_span_hot[i];
        uint64_t h = sw_atomic_load_acquire(&hot->state);
        if (!h)
            continue;
        uint64_t ref = sw_atomic_load_acquire(&hot->seg);
        if (sw_atomic_load_acquire(&hot->state) != h || (uint32_t)ref >= SEG_SLOTS)
            continue;
        int64_t root_end = sw_atomic_load_relaxed(&g_segs[(uint32_t)ref].root_end_ms);
        if (root_end == 0 || now - root_end < REAP_AFTER_MS)
            continue;
        struct span_end e = {0, true, "timeout",
                             "span still open long after its segment's root span ended", now};
        span_end(h, &e);
        sw_atomic_add_relaxed(&g_reaped, 1);
    }
}

/* seg_claim, reaping forgotten spans once when the pool is exhausted. */
static int seg_claim_reaping(uint64_t *root, int64_t now)
{
    int slot = seg_claim(root);
    if (SW_UNLIKELY(slot < 0)) {
        reap(now);
        slot = seg_claim(root);
    }
    return slot;
}

/* span_claim, reaping forgotten spans once when the pool is exhausted. */
static int span_claim_reaping(uint64_t *h, int64_t now)
{
    int slot = span_claim(h);
    if (SW_UNLIKELY(slot < 0)) {
        reap(now);
        slot = span_claim(h);
    }
    return slot;
}

/* ---------------------------------------------------------------- public API */

static size_t g_seg_bytes, g_span_bytes;

int sw_trace_init(const struct sw_config *cfg)
{
    return sw_trace_init_as(cfg, (uint32_t)syscall(SYS_geteuid));
}

int sw_trace_init_as(const struct sw_config *cfg, uint32_t start_euid)
{
    if (!cfg)
        return -EINVAL;
    g_cfg = cfg;
    lim_make();
    sw_clock_init(cfg->tsc_clock);
    g_start_ms = sw_trace_now_ms();
    g_init_euid = start_euid;
    sw_svc_init(cfg, &g_sampler, svc_dir);
    sw_id_init();
    g_uuid = sw_id_uuid_bytes();
    g_svc_inst_len =
        sw_sw8_svc_inst(g_svc_inst, sizeof(g_svc_inst), cfg->service_name, cfg->instance_name);
    uuid_b64_make();
    if (!g_map) {
        g_seg_bytes = sizeof(struct seg) * SEG_SLOTS;
        g_span_bytes = sizeof(struct span) * SPAN_SLOTS;
        size_t hot = sizeof(struct span_hot) * ALL_SPAN_SLOTS;
        size_t live = sizeof(uint64_t) * SEG_SLOTS;
        size_t bits = sizeof(uint64_t) * (SEG_SLOTS / 64 + SPAN_SLOTS / 64);
        size_t total = g_seg_bytes + g_span_bytes + hot + live + bits;
        void *m = mmap(NULL, total, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED)
            return -ENOMEM;
        g_map = m;
        g_map_bytes = total;
        uint8_t *p = m;
        g_segs = (struct seg *)(void *)p;
        p += g_seg_bytes;
        g_spans = (struct span *)(void *)p;
        p += g_span_bytes;
        g_span_hot = (struct span_hot *)(void *)p;
        p += hot;
        g_seg_live = (_Atomic uint64_t *)(void *)p;
        p += live;
        g_seg_pool.words = (_Atomic uint64_t *)(void *)p;
        g_seg_pool.nwords = SEG_SLOTS / 64;
        p += sizeof(uint64_t) * (SEG_SLOTS / 64);
        g_span_pool.words = (_Atomic uint64_t *)(void *)p;
        g_span_pool.nwords = SPAN_SLOTS / 64;
    }
    g_seg_pool.nslots = SEG_SLOTS;
    g_span_pool.nslots = SPAN_SLOTS;
    g_ready = true;
    return 0;
}

void sw_trace_before_fork(void)
{
    g_fork_exit.valid = false;
    if (!g_ready)
        return;
    uint64_t cur = current_resolve();
    int cs = handle_slot(cur);
    if (cs < 0)
        return;
    int sslot = seg_join(cur);
    if (sslot < 0)
        return;
    struct seg *sg = &g_segs[sslot];
    uint64_t xgen = 0, h = 0;
    int xs = -1, slot = -1;
    int limit = sw_svc_span_limit(); /* the file's or OAP's (svcblock.h) */
    int64_t now = sw_trace_now_ms();
    if (sg->sampled && sw_atomic_load_relaxed(&sg->next_span_id) < limit)
        xs = xslot_claim(&xgen);
    if (xs >= 0)
        slot = span_claim_reaping(&h, now);
    if (slot < 0) {
        if (xs >= 0)
            xslot_free((uint32_t)xs, xgen);
        seg_put((uint32_t)sslot);
        return;
    }
    struct span *sp = &g_spans[slot];
    sp->span_id = atomic_fetch_add_explicit(&sg->next_span_id, 1, memory_order_relaxed);
    sp->parent_id = 0;
    sp->type = SW_SPAN_EXIT;
    sp->layer = SW_LAYER_UNKNOWN;
    sp->recorded = true;
    sp->start_ms = now;
    var_named(sp, "", 0, "", 0); /* named when the child execs (exec_exit_close) */
    sp->xslot = (uint32_t)xs + 1;
    sp->xgen = xgen;
    span_publish(slot, h, (uint32_t)sslot); /* keeps the count taken by seg_join */
    bool attached = false;
    /* seq_cst: before the words (span_end reads exec_any first, see there). */
    atomic_store_explicit(&span_at(cs)->exec_any, 1, memory_order_seq_cst);
    for (uint32_t i = 0; i < EXEC_EXITS && !attached; i++) {
        uint64_t z = 0;
        attached = atomic_compare_exchange_strong_explicit(
            &span_at(cs)->exec_exits[i], &z, h, memory_order_seq_cst, memory_order_relaxed);
    }
    /* seq_cst: pairs with span_end's state CAS and exec_any/exec_exits loads (see there). */
    if (!attached || atomic_load_explicit(&g_span_hot[cs].state, memory_order_seq_cst) != cur) {
        /* Too many forks in this request, or it ended meanwhile: no EXEC exit. */
        xslot_free((uint32_t)xs, xgen);
        sp->xslot = 0;
        sp->recorded = false;
        struct span_end e = {0, false, NULL, NULL, now};
        span_end(h, &e);
        return;
    }
    g_fork_exit.span_id = sp->span_id;
    g_fork_exit.xslot = (uint32_t)xs + 1;
    g_fork_exit.xgen = xgen;
    g_fork_exit.valid = true;
}

void sw_trace_after_fork_parent(void)
{
    g_fork_exit.valid = false;
}

void sw_trace_after_fork(void)
{
    if (!g_map)
        return;
    /* The request this thread was serving when it forked: a program the child execs joins it
     * (CGI). Read before the pools are reset; the parent still owns the segment. */
    g_fork_parent.valid = false;
    uint64_t cur = current_resolve();
    int cslot = handle_slot(cur);
    if (cslot >= 0) {
        uint64_t ref = sw_atomic_load_acquire(&g_span_hot[cslot].seg);
        struct seg *sg = (uint32_t)ref < SEG_SLOTS ? &g_segs[(uint32_t)ref] : NULL;
        if (sg && sg->sampled) {
            /* The parent's uuid is still this process's: it is drawn again further down. */
            seg_id_texts(sg, g_fork_parent.trace_id, g_fork_parent.seg_id);
            seg_endpoint(sg, g_fork_parent.endpoint);
            g_fork_parent.span_id = g_fork_exit.valid ? g_fork_exit.span_id : 0;
            g_fork_parent.xslot = g_fork_exit.valid ? g_fork_exit.xslot : 0;
            g_fork_parent.xgen = g_fork_exit.xgen;
            g_fork_parent.valid = true;
        }
    }
    /* Only this thread exists now: plain resets are fine. Generations are kept, so handles
     * of the parent that the connection layer may still hold never match a new span. */
    memset((void *)g_seg_pool.words, 0, sizeof(uint64_t) * (SEG_SLOTS / 64));
    memset((void *)g_span_pool.words, 0, sizeof(uint64_t) * (SPAN_SLOTS / 64));
    memset((void *)g_span_hot, 0, sizeof(struct span_hot) * ALL_SPAN_SLOTS);
    memset((void *)g_seg_live, 0, sizeof(uint64_t) * SEG_SLOTS);
    tls_current = 0;
    memset(tls_open, 0, sizeof(tls_open));
    tls_open_pos = 0;
    tls_open_n = 0;
    sw_sampler_reset(&g_sampler); /* the process's own; a shared block's quota is kept */
    sw_sampler_reset(&g_keep_sampler);
    sw_svc_after_fork();
    sw_id_reset_after_fork(); /* new process uuid: the child's ids never repeat the parent's */
    uuid_b64_make();
    struct sw_ring *r = sw_atomic_load_relaxed(&g_ring);
    sw_atomic_store_relaxed(&g_ring, NULL);
    fill_reset(); /* before the detach: no ring, admit */
    if (r)
        sw_ring_detach(r); /* the child's copy of the mapping; the parent's ring file stays */
    sw_atomic_store_relaxed(&g_ring_failed, false);
    sw_atomic_store_relaxed(&g_last_spawn_ms, 0);
    g_ring_once = (pthread_once_t)PTHREAD_ONCE_INIT;
    sw_clock_after_fork();
    g_start_ms = sw_trace_now_ms();
    sw_atomic_store_relaxed(&g_committed, 0);
    sw_atomic_store_relaxed(&g_dropped, 0);
    sw_atomic_store_relaxed(&g_shed, 0);
    sw_atomic_store_relaxed(&g_parent_unknown, 0);
    for (int k = 0; k < SW_RING_KEEP_N; k++)
        sw_atomic_store_relaxed(&g_keep[k], 0);
    sw_atomic_store_relaxed(&g_shed_logged, false);
    sw_atomic_store_relaxed(&g_limited, 0);
    sw_atomic_store_relaxed(&g_spans_dropped, 0);
    sw_atomic_store_relaxed(&g_reaped, 0);
    sw_atomic_store_relaxed(&g_last_reap_ms, 0);
}

/*
 * An unsampled entry: a span of the pool without a segment, so that exits made while serving
 * it send no sw8 and record nothing (see SEG_NONE). The only entries with a handle below
 * SPAN_SLOTS (every other entry is the root span of its segment, ROOT_SLOT): what
 * sw_trace_entry_unrecorded() tells the connection layer.
 */
static inline __attribute__((always_inline)) uint64_t entry_none(int64_t start_ms)
{
    uint64_t h;
    int slot = span_claim_none(&h);
    if (SW_UNLIKELY(slot < 0) && (slot = span_claim_reaping(&h, start_ms)) < 0) {
        sw_atomic_add_relaxed(&g_dropped, 1);
        return 0;
    }
    struct span *us = &g_spans[slot];
    us->span_id = 0;
    us->parent_id = -1;
    us->type = SW_SPAN_ENTRY;
    us->recorded = false;
    span_publish_none(slot, h);
    tls_remember(h);
    return h;
}

/* The usual request when the ring has no room for its segment (ring_admits): unsampled. */
static SW_NOINLINE uint64_t entry_shed(int64_t start_ms)
{
    return entry_none(start_ms);
}

/*
 * The path of an entry's target into *path and *plen (as the HTTP parser found it, for an
 * origin-form target, else path_scan); true when agent.ignore_suffix in effect (`e`: the file's
 * or OAP's, svcblock.h) ignores it.
 */
static inline __attribute__((always_inline)) bool req_path_ignored(const struct sw_req_info *req,
                                                                   const struct sw_eff *e,
                                                                   const char **path, size_t *plen)
{
    const char *suf;
    bool scanned;
    if (SW_LIKELY(req->path_valid && req->path_len <= req->target_len &&
                  req->path_suffix <= req->path_len)) {
        /* The parser found them (origin-form). */
        *path = req->target;
        *plen = req->path_len;
        suf = req->path_suffix ? req->target + req->path_suffix : NULL;
        scanned = true;
    } else {
        *path = path_scan(req->target, req->target_len, req->padded, plen, &suf, &scanned);
    }
    if (e->ignore_suffix->n <= 0)
        return false;
    return scanned ? suf && sw_cfg_list_ignored_suffix(e->ignore_suffix, suf,
                                                       (size_t)(*path + *plen - suf))
                   : sw_cfg_list_ignored_path(e->ignore_suffix, *path, *plen);
}

/*
 * Keeping beyond the quota (swagent.keep_errors, swagent.keep_slow_ms). A request that the
 * sampler turns down (its window's budget is used up; not one shed for want of ring room, nor
 * an ignored path) is "keepable" while either key is on: instead of a bare span slot
 * (entry_none) it gets a segment whose root span holds its names (span_fill, as a sampled one),
 * but no ids, no prebuilt record and nothing sent downstream: its exits (HTTP, and database and
 * cache commands: sw_trace_db_start_in) record their spans into the arena (so a kept segment is
 * whole) and send no sw8, only sw8-correlation. Its handle has SW_TRACE_KEEP_BIT set, so the
 * connection layer does not follow its response (sw_trace_entry_unrecorded) except for a look
 * at the status line of its first write (sw_trace_entry_respond). The request is kept
 * (keep_promote: ids drawn, the root recorded, tag swagent.kept=error|slow) when
 *   - that status is 5xx, or an exit of it failed (an error log, a 5xx answer, or a database
 *     or cache command's error reply), with keep_errors;
 *   - its response begins keep_slow_ms or more after its request did (time to the response's
 *     first byte: the end of an unfollowed response is not known);
 *   - or, at its end when that end is known (a status, or an error: a reset, a connection
 *     error), for the same reasons or an error end;
 * and swagent.keep_n_per_3_secs (a sampler of its own, per process) has room; else it is
 * counted as keep_limited. A kept request's response is followed from its first write, so it
 * ends with its status and end time like a sampled one. Not kept: its segment is freed when it
 * ends, nothing committed. Kept segments are counted (g_keep, the ring's kept: `swagent
 * status`, the reporter's swagent_kept_* meters).
 *
 * Downstream: a keepable request's exits sent no sw8 (it was not sampled when they were made),
 * so a service it called has no segment in this trace: the UI shows the kept segment with its
 * exit spans and without the callee's segments (docs/configuration.md).
 *
 * Cost on an unsampled request that ends fine: a segment claim instead of a span claim, the
 * names written (span_fill), one clock read and a status-line test at its first write, the
 * segment's count dropped and slot freed at its end (bench/README.md, "Keeping beyond the
 * quota").
 */
enum keep_why { KEEP_NO, KEEP_ERROR, KEEP_SLOW, KEEP_PROFILED };

/* Unsampled requests are keepable: keep_errors or keep_slow_ms, or a profile task is active
 * (a request it profiles is kept: see keep_profile). */
static inline bool keep_on(void)
{
    return g_lim.keep || sw_profile_on();
}

/* Why a keepable request is kept now (`status` 0: not known; `failed`: it ended in an error). */
static inline enum keep_why keep_reason(const struct seg *sg, const struct span *sp, int status,
                                        bool failed, int64_t now)
{
    if (g_cfg->keep_errors &&
        (failed || status >= 500 || (sw_atomic_load_relaxed(&sg->flags) & SEG_EXIT_FAILED)))
        return KEEP_ERROR;
    if (g_lim.slow_ms && now - sp->start_ms >= g_lim.slow_ms)
        return KEEP_SLOW;
    return KEEP_NO;
}

static void keep_count(enum sw_ring_keep k)
{
    sw_atomic_add_relaxed(&g_keep[k], 1);
    struct sw_ring *r = ring_get();
    if (r)
        sw_ring_count_keep(r, k);
}

/*
 * Keeps the keepable segment `sg` (its root span `sp` still open, owned by the caller): within
 * the keep limit and when the ring has room, its ids are drawn, its root is tagged
 * swagent.kept and recorded from now on, and the segment is committed when it completes.
 * Returns whether it is kept.
 */
/* Copies up to `cap` bytes of a part of the request to *q; returns the length kept. */
static inline __attribute__((always_inline)) uint16_t kraw_put(uint8_t **q, const char *s, size_t n,
                                                               size_t cap)
{
    if (!s)
        return 0;
    if (SW_UNLIKELY(n > cap))
        n = cap;
    copy_small(*q, s, n);
    *q += n;
    return (uint16_t)n;
}

/* Saves a keepable entry's request (struct keep_raw); `path` in its target or NULL. */
static inline __attribute__((always_inline)) void
kraw_save(struct seg *sg, const struct sw_req_info *req, const char *path, size_t plen)
{
    struct keep_raw *k = &sg->kraw;
    uint8_t *q = sg->arena + ARENA_BYTES - KRAW_MAX;
    k->ml = kraw_put(&q, req->method, req->method_len, KRAW_METHOD);
    k->tl = kraw_put(&q, req->target, req->target_len, KRAW_TARGET);
    k->hl = kraw_put(&q, req->host, req->host_len, KRAW_HOST);
    k->dl = kraw_put(&q, req->headers_tag, req->headers_tag_len, KRAW_HDRS);
    k->pl = kraw_put(&q, req->peer, req->peer_len, KRAW_PEER);
    k->host = req->host != NULL;
    k->tls = req->tls;
    k->filled = false;
    k->path_ok =
        path && req->target && path >= req->target && (size_t)(path - req->target) + plen <= k->tl;
    k->path_off = k->path_ok ? (uint16_t)(path - req->target) : 0;
    k->path_len = (uint16_t)plen;
}

/* The root's names from the saved request (keep_promote). */
static void kraw_fill(struct seg *sg, struct span *sp)
{
    const struct keep_raw *k = &sg->kraw;
    if (k->filled)
        return;
    const char *b = (const char *)sg->arena + ARENA_BYTES - KRAW_MAX;
    struct sw_req_info r = {0};
    r.method = k->ml ? b : NULL;
    r.method_len = k->ml;
    b += k->ml;
    r.target = b;
    r.target_len = k->tl;
    b += k->tl;
    r.host = k->host ? b : NULL;
    r.host_len = k->hl;
    b += k->hl;
    r.headers_tag = k->dl ? b : NULL;
    r.headers_tag_len = k->dl;
    b += k->dl;
    r.peer = k->pl ? b : NULL;
    r.peer_len = k->pl;
    r.tls = k->tls;
    span_fill(sp, &r, sp->start_ms, r.host, r.host ? r.host_len : 0,
              k->path_ok ? r.target + k->path_off : NULL, k->path_ok ? k->path_len : 0);
}

static SW_NOINLINE bool keep_promote(struct seg *sg, struct span *sp, enum keep_why why,
                                     int64_t now)
{
    if (sp->recorded)
        return true;
    if (sw_atomic_load_relaxed(&sg->flags) & SEG_KEEP_REFUSED)
        return false;
    /* A profiled request is kept beyond keep_n_per_3_secs (MaxSamplingCount bounds them). */
    if (why != KEEP_PROFILED && !sw_sampler_try(&g_keep_sampler, g_cfg->keep_n_per_3_secs, now)) {
        atomic_fetch_or_explicit(&sg->flags, SEG_KEEP_REFUSED, memory_order_relaxed);
        keep_count(SW_RING_KEEP_LIMITED);
        return false;
    }
    if (!ring_admits()) {
        atomic_fetch_or_explicit(&sg->flags, SEG_KEEP_REFUSED, memory_order_relaxed);
        return false; /* counted as shed */
    }
    kraw_fill(sg, sp);
    if (!(sw_atomic_load_relaxed(&sg->flags) & SEG_PROFILED))
        seg_new_ids(sg, sp->start_ms); /* (a profiled one's snapshots name the ids it has) */
    static const char *const why_tag[] = {"", "error", "slow", "profiled"};
    struct sw_wbuf w;
    sw_wbuf_init(&w, sp->ctags + sp->ctags_len, sizeof(sp->ctags) - sp->ctags_len);
    sw_wbuf_str(&w, "swagent.kept", 12);
    sw_wbuf_str(&w, why_tag[why], strlen(why_tag[why]));
    if (!w.overflow) {
        sp->ctags_n++;
        sp->ctags_len = (uint16_t)(sp->ctags_len + w.len);
    }
    root_image(sg, sp);
    sp->recorded = true;
    atomic_fetch_or_explicit(&sg->flags, SEG_KEPT, memory_order_release);
    keep_count(why == KEEP_ERROR ? SW_RING_KEPT_ERROR : SW_RING_KEPT_SLOW);
    return true;
}

/*
 * A span of keepable segment `sg` ends (span_end_rest): a failed exit marks the segment; the
 * root decides whether the request is kept when its end is known (a status or an error; an
 * unfollowed response ends without either, when the next request comes).
 */
static void keep_at_end(struct seg *sg, struct span *sp, bool root, const struct span_end *e)
{
    bool failed = e->kind != NULL;
    if (!root) {
        if (failed || e->status >= 500)
            atomic_fetch_or_explicit(&sg->flags, SEG_EXIT_FAILED, memory_order_relaxed);
        return;
    }
    if (sp->recorded || (!failed && e->status <= 0))
        return;
    enum keep_why why = keep_reason(sg, sp, e->status, failed, e->end_ms);
    if (why != KEEP_NO)
        (void)keep_promote(sg, sp, why, e->end_ms);
}

/*
 * sw_trace_entry_respond of a request a profile task watches (keep_profile): kept once it had
 * a sample; else its timer is deleted (no sample after its response either: none would name a
 * segment that is never reported) and the other reasons decide.
 */
static SW_NOINLINE bool keep_respond_profiled(struct seg *sg, uint64_t h, int status,
                                              int64_t now_ms)
{
    if (sw_profile_sampled(h))
        return keep_promote(sg, &sg->root, KEEP_PROFILED, now_ms);
    (void)sw_profile_end(h);
    enum keep_why why = keep_reason(sg, &sg->root, status, false, now_ms);
    return why != KEEP_NO && keep_promote(sg, &sg->root, why, now_ms);
}

/* (The entry is open: only the connection layer, which calls this, ends an entry.) */
bool sw_trace_entry_respond(uint64_t h, int status, int64_t now_ms)
{
    uint32_t slot = ((uint32_t)h & ~SW_TRACE_KEEP_BIT) - SPAN_SLOTS;
    if (SW_UNLIKELY(slot >= SEG_SLOTS || !g_ready))
        return false;
    struct seg *sg = &g_segs[slot];
    if (SW_UNLIKELY(!sg->keep || sg->gen != (uint32_t)(h >> 32)))
        return false;
    if (SW_UNLIKELY(sw_atomic_load_relaxed(&sg->flags) & SEG_PROFILED))
        return keep_respond_profiled(sg, h, status, now_ms);
    enum keep_why why = keep_reason(sg, &sg->root, status, false, now_ms);
    return SW_UNLIKELY(why != KEEP_NO) && keep_promote(sg, &sg->root, why, now_ms);
}

/*
 * A keepable request the active profile task wants (issue 39: the profiled request's segment
 * is reported even if it was not sampled): its ids are drawn now, for the snapshots to name,
 * and it is watched. keep_reason keeps it once a sample was taken (at its response's first
 * write, or its end: sw_trace_entry_finish), beyond keep_n_per_3_secs. The cost of a task
 * that matches: ids drawn for each matching unsampled request while the task has traces left.
 */
static SW_NOINLINE void keep_profile(struct seg *sg, uint64_t h, const struct sw_req_info *req,
                                     const char *path, size_t plen, int64_t start_ms)
{
    seg_new_ids(sg, start_ms);
    atomic_fetch_or_explicit(&sg->flags, SEG_PROFILED, memory_order_relaxed);
    (void)sw_profile_entry_slow(h, req->method, req->method_len, path, plen, sg->tid, sg->seg_value,
                                start_ms);
}

/* The entry `h` ended with a sample taken (sw_profile_end): a keepable one not kept is. */
static SW_NOINLINE void keep_profiled_end(uint64_t h, int64_t now_ms)
{
    uint32_t slot = ((uint32_t)h & ~SW_TRACE_KEEP_BIT) - SPAN_SLOTS;
    if (slot >= SEG_SLOTS || !g_ready || !(h & SW_TRACE_KEEP_BIT))
        return;
    struct seg *sg = &g_segs[slot];
    if (sg->keep && sg->gen == (uint32_t)(h >> 32) &&
        (sw_atomic_load_relaxed(&sg->flags) & SEG_PROFILED))
        (void)keep_promote(sg, &sg->root, KEEP_PROFILED, now_ms);
}

/*
 * A keepable entry (see Keeping beyond the quota): a segment, its root span filled, not
 * sampled. `path` as entry_any found it, or NULL: found here, and an ignored path
 * (agent.ignore_suffix in effect, `e`) is not kept (entry_none). Segment pool exhausted:
 * entry_none too.
 */
static SW_NOINLINE uint64_t entry_keep(const struct sw_req_info *req, int64_t start_ms,
                                       const struct sw_eff *e, const char *path, size_t plen)
{
    if (!path && req_path_ignored(req, e, &path, &plen))
        return entry_none(start_ms);
    bool prof = false;
    if (SW_UNLIKELY(sw_profile_on())) {
        prof = sw_profile_wants(req->method, req->method_len, path, plen);
        if (!g_lim.keep && !prof)
            return entry_none(start_ms); /* keepable only for a task that does not want it */
    }
    uint64_t h;
    int sslot = seg_claim_in(&h);
    if (SW_UNLIKELY(sslot < 0))
        return entry_none(start_ms);
    struct seg *sg = &g_segs[sslot];
    struct span *sp = &sg->root;
    sp->type = SW_SPAN_ENTRY;
    sp->recorded = false;
    sp->start_ms = start_ms;
    sg->keep = true;
    kraw_save(sg, req, path, plen);
    h |= SW_TRACE_KEEP_BIT;
    seg_publish((uint32_t)sslot);
    span_publish((int)ROOT_SLOT(sslot), h, (uint32_t)sslot);
    tls_remember(h);
    if (SW_UNLIKELY(prof))
        keep_profile(sg, h, req, path, plen, start_ms);
    return h;
}

/*
 * sw_trace_entry_start's usual request (see there): sampled, no incoming sw8, sw8-correlation
 * or sw8-x, the path as the HTTP parser found it (path..plen), not ignored. The same steps as
 * the general path takes for it, with the span filled inline.
 */
static inline __attribute__((always_inline)) uint64_t entry_usual(const struct sw_req_info *req,
                                                                  int64_t start_ms, size_t plen)
{
    if (SW_UNLIKELY(!ring_admits()))
        return entry_shed(start_ms);
    uint64_t h;
    int sslot = seg_claim_in(&h);
    if (SW_UNLIKELY(sslot < 0) && (sslot = seg_claim_reaping(&h, start_ms)) < 0) {
        sw_atomic_add_relaxed(&g_dropped, 1);
        return 0;
    }
    struct seg *sg = &g_segs[sslot];
    struct span *sp = &sg->root;
    uint32_t tid;
    uint64_t tv = sw_id_next2_in(start_ms, &tid); /* seg_new_ids without a ref */
    sg->tid = tid;
    sg->trace_value = tv;
    sg->seg_value = tv + 1;
    sp->type = SW_SPAN_ENTRY;
    sg->sampled = true;
    sp->recorded = true;
    /* host_len as it is: span_fill_in and span_fill_any test host itself. */
    span_fill_in(sp, req, start_ms, req->host, req->host_len, req->target, plen);
    /* No ref, no tags; the layer as span_reset left it. */
    root_image_usual(sp, tid, tv + 1, tv, start_ms, SW_SPAN_ENTRY, SW_LAYER_HTTP);
    uint64_t gen = h >> 32; /* the segment's generation (seg_claim_in) */
    sw_atomic_store_release(&g_seg_live[sslot], gen << 32 | 1u); /* seg_publish */
    struct span_hot *hot = &g_span_hot[ROOT_SLOT(sslot)];        /* span_publish */
    sw_atomic_store_relaxed(&hot->seg, gen << 32 | (uint32_t)sslot);
    sw_atomic_store_release(&hot->state, h);
    tls_remember(h);
    sw_profile_entry(h, req->method, req->method_len, req->target, plen, tid, tv + 1, start_ms);
    return h;
}

static uint64_t entry_any(const struct sw_req_info *req, int64_t start_ms, const struct sw_eff *e);
static uint64_t entry_budget(const struct sw_req_info *req, int64_t start_ms,
                             const struct sw_eff *e);

SW_HOT_PATH uint64_t sw_trace_entry_start(const struct sw_req_info *req, int64_t start_ms)
{
    if (SW_UNLIKELY(!g_ready || !req))
        return 0;
    /* The sampling settings: the file's, or OAP's (CDS), and the service's quota (svcblock.h). */
    const struct sw_eff *e = sw_svc_eff();
    /* The usual request (entry_usual): every request sampled and nothing incoming to decode. */
    if (SW_LIKELY(!(req->sw8_len | req->correlation_len | req->sw8x_len) &&
                  e->sample_n_per_3_secs <= 0 && req->path_valid &&
                  req->path_len <= req->target_len && req->path_suffix <= req->path_len &&
                  !(req->path_suffix &&
                    sw_cfg_list_ignored_suffix(e->ignore_suffix, req->target + req->path_suffix,
                                               (size_t)(req->path_len - req->path_suffix)))))
        return entry_usual(req, start_ms, req->path_len);
    if (SW_LIKELY(!(req->sw8_len | req->correlation_len) && e->sample_n_per_3_secs > 0))
        return entry_budget(req, start_ms, e);
    return entry_any(req, start_ms, e);
}

/*
 * sw_trace_entry_start's request with nothing incoming while sampling is on: the usual one of
 * them is past this window's budget (entry_any's first test), and costs only its span slot
 * (entry_none). Apart from entry_any, whose frame the usual one does not need.
 */
SW_HOT static SW_NOINLINE uint64_t entry_budget(const struct sw_req_info *req, int64_t start_ms,
                                                const struct sw_eff *e)
{
    if (SW_LIKELY(sw_sampler_count(e->quota, start_ms) >= e->sample_n_per_3_secs))
        return keep_on() ? entry_keep(req, start_ms, e, NULL, 0) : entry_none(start_ms);
    return entry_any(req, start_ms, e);
}

/* sw_trace_entry_start for any request. */
SW_HOT static SW_NOINLINE uint64_t entry_any(const struct sw_req_info *req, int64_t start_ms,
                                             const struct sw_eff *e)
{
    bool has_corr = req->correlation && req->correlation_len;
    bool has_sw8 = req->sw8 && req->sw8_len;
    int budget = e->sample_n_per_3_secs;
    struct sw_sampler *quota = e->quota;
    const char *path = NULL;
    size_t plen = 0;
    bool sampled = false, ignored = false, keepable = false;
    uint64_t h = 0;
    if (!has_sw8 && !has_corr && budget > 0 && sw_sampler_count(quota, start_ms) >= budget) {
        /*
         * The usual unsampled request: no sw8, and this window's budget is used up, so whether
         * the path is ignored does not matter (not recorded either way, and an ignored request
         * would not count against the budget). No path, no names; keepable: entry_keep.
         */
        if (keep_on())
            return entry_keep(req, start_ms, e, NULL, 0);
        goto unsampled;
    }
    ignored = req_path_ignored(req, e, &path, &plen);
    has_sw8 = has_sw8 && !ignored;
    if (!has_sw8) {
        bool in_quota = !ignored && (budget <= 0 || sw_sampler_try(quota, budget, start_ms));
        sampled = in_quota && ring_admits();
        keepable = !in_quota && !ignored && keep_on(); /* over the quota, not shed or ignored */
        if (!sampled && !has_corr) {
            if (keepable)
                return entry_keep(req, start_ms, e, path, plen);
            goto unsampled; /* unsampled and nothing to pass on: no segment (see SEG_NONE) */
        }
    }
    int sslot = seg_claim_reaping(&h, start_ms);
    if (sslot < 0) {
        sw_atomic_add_relaxed(&g_dropped, 1);
        return 0;
    }
    struct seg *sg = &g_segs[sslot];
    struct span *sp = &sg->root;
    sp->type = SW_SPAN_ENTRY;
    if (SW_UNLIKELY(has_sw8)) {
        sw_sw8_decode(req->sw8, req->sw8_len, &sg->ref);
        sg->has_ref = sg->ref.valid;
        if (sg->has_ref) {
            /* Forced (as in Java) unless the ring has no room for the segment. */
            sampled = ring_admits();
            if (sampled)
                sw_sampler_force(quota, start_ms);
        } else {
            bool in_quota = sw_sampler_try(quota, budget, start_ms);
            sampled = in_quota && ring_admits();
            keepable = !in_quota && keep_on();
        }
    }
    sg->sampled = sampled;
    if (SW_UNLIKELY(has_corr)) {
        size_t n = sw_correlation_filter(
            req->correlation, req->correlation_len, g_cfg->correlation_element_max_number,
            g_cfg->correlation_value_max_length, sg->corr, sizeof(sg->corr));
        sg->corr_len = (uint16_t)(n < sizeof(sg->corr) ? n : 0);
    }
    sp->recorded = sampled;
    if (sampled) {
        if (SW_UNLIKELY(req->sw8x && req->sw8x_len)) {
            struct sw_sw8x x;
            sw_sw8x_decode(req->sw8x, req->sw8x_len, &x);
            sg->skip_analysis = x.skip_analysis;
        }
        seg_new_ids(sg, start_ms);
        span_fill(sp, req, start_ms, req->host, req->host ? req->host_len : 0, path, plen);
        if (SW_UNLIKELY(sg->corr_len))
            span_auto_tags(sp, sg);
        root_image(sg, sp);
    } else if (keepable) {
        /* As entry_keep, with the sw8-correlation this segment holds (and its names made at
         * once: auto tags need them in place; an uncommon request). */
        sg->keep = true;
        sg->kraw.filled = true;
        span_fill(sp, req, start_ms, req->host, req->host ? req->host_len : 0, path, plen);
        if (SW_UNLIKELY(sg->corr_len))
            span_auto_tags(sp, sg);
        h |= SW_TRACE_KEEP_BIT;
    }
    seg_publish((uint32_t)sslot);
    span_publish((int)ROOT_SLOT(sslot), h, (uint32_t)sslot);
    tls_remember(h);
    if (sampled)
        sw_profile_entry(h, req->method, req->method_len, path, plen, sg->tid, sg->seg_value,
                         start_ms);
    else if (SW_UNLIKELY(keepable && sw_profile_on() && path &&
                         sw_profile_wants(req->method, req->method_len, path, plen)))
        keep_profile(sg, h, req, path, plen, start_ms);
    return h;

unsampled:
    return entry_none(start_ms);
}

SW_HOT_PATH void sw_trace_entry_finish(uint64_t h, int status_code, int64_t end_ms)
{
    struct span_end e = {status_code, status_code >= 400, NULL, NULL, end_ms};
    if (SW_UNLIKELY(sw_profile_end(h)))
        keep_profiled_end(h, end_ms);
    span_end_in(h, &e);
}

void sw_trace_entry_abort(uint64_t h, const char *error_kind, const char *message, int64_t end_ms)
{
    struct span_end e = {0, true, error_kind ? error_kind : "abort", message, end_ms};
    if (SW_UNLIKELY(sw_profile_end(h)))
        keep_profiled_end(h, end_ms);
    span_end(h, &e);
}

/* Writes `name: value\r\n` into inject at *at; false (nothing written) when it does not fit. */
static bool inject_line(char *inject, size_t cap, size_t *at, const char *name, size_t name_len,
                        const char *value, size_t value_len)
{
    if (name_len + 2 + value_len + 2 > cap - *at)
        return false;
    size_t o = *at;
    memcpy(inject + o, name, name_len);
    o += name_len;
    memcpy(inject + o, ": ", 2);
    o += 2;
    memcpy(inject + o, value, value_len);
    o += value_len;
    memcpy(inject + o, "\r\n", 2);
    *at = o + 2;
    return true;
}

/* Writes the propagation header lines for an exit (span id `span_id`) of segment `sg`. */
SW_HOT static size_t inject_headers(const struct seg *sg, int32_t span_id, const char *peer,
                                    char *inject, size_t cap)
{
    size_t at = 0;
    if (!inject || cap == 0)
        return 0;
    if (sg->sampled) {
        static const char name[] = "sw8: ";
        if (cap > sizeof(name) - 1 + 2) {
            /* The ids' base64 made from their numbers (id_b64), a ref's trace id encoded. */
            char tb[(SW_ID_MAX / 3 + 1) * 4 + 1], gb[(SW_ID_MAX / 3 + 1) * 4 + 1];
            char endpoint[OP_MAX];
            size_t tn = 0;
            if (sg->has_ref) {
                size_t l = sg->ref.len[0];
                long k = l ? sw_b64_encode(sg->ref.trace_id, l, tb, sizeof(tb)) : -1;
                tn = k > 0 ? (size_t)k : 0;
            } else {
                tn = id_b64(tb, sg->tid, sg->trace_value);
            }
            size_t gn = id_b64(gb, sg->tid, sg->seg_value);
            seg_endpoint(sg, endpoint);
            size_t n =
                sw_sw8_encode_pre(inject + sizeof(name) - 1, cap - (sizeof(name) - 1) - 2, tb, tn,
                                  gb, gn, span_id, g_svc_inst, g_svc_inst_len, endpoint, peer);
            if (n > 0) {
                memcpy(inject, name, sizeof(name) - 1);
                at = sizeof(name) - 1 + n;
                memcpy(inject + at, "\r\n", 2);
                at += 2;
            }
        }
    }
    if (sg->corr_len)
        (void)inject_line(inject, cap, &at, "sw8-correlation", 15, sg->corr, sg->corr_len);
    if (sg->sampled && sg->skip_analysis)
        (void)inject_line(inject, cap, &at, "sw8-x", 5, "1", 1);
    return at;
}

/*
 * A root exit of a process exec'ed with SW_AGENT_PARENT_CTX (a CGI program): its segment is
 * an Entry span `EXEC:<basename>` (span 0) carrying a CrossProcess ref to the parent's span,
 * and the exit as its child (span 1). SkyWalking puts refs on entry spans only, so the exit
 * alone could not say where it came from. The entry starts and ends with the exit.
 */
static uint64_t exec_child_exit(const struct sw_req_info *req, int64_t start_ms, char *inject,
                                size_t cap, size_t *inject_len)
{
    uint64_t h0, h1;
    if (!ring_admits())
        return 0;
    int sslot = seg_claim_reaping(&h0, start_ms);
    if (sslot < 0) {
        sw_atomic_add_relaxed(&g_dropped, 1);
        return 0;
    }
    int s1 = span_claim_reaping(&h1, start_ms);
    if (s1 < 0) {
        pool_free(&g_seg_pool, (uint32_t)sslot);
        sw_atomic_add_relaxed(&g_dropped, 1);
        return 0;
    }
    sw_sampler_force(sw_svc_eff()->quota, start_ms);
    struct seg *sg = &g_segs[sslot];
    sg->sampled = true;
    sg->ref = g_exec_parent;
    sg->has_ref = true;
    seg_new_ids(sg, start_ms);
    sw_atomic_store_relaxed(&sg->next_span_id, 2);

    struct span *e = &sg->root;
    e->type = SW_SPAN_ENTRY;
    e->layer = SW_LAYER_UNKNOWN;
    e->recorded = true;
    e->start_ms = start_ms;
    var_named(e, g_exec_op, g_exec_op_len, "", 0);

    struct span *x = &g_spans[s1];
    x->span_id = 1;
    x->parent_id = 0;
    x->type = SW_SPAN_EXIT;
    x->recorded = true;
    span_fill(x, req, start_ms, req->host ? req->host : req->peer,
              req->host ? req->host_len : (req->peer ? req->peer_len : 0), NULL, 0);
    x->close_with = h0;
    char peer[PEER_MAX];
    *inject_len = inject_headers(sg, 1, span_peer(x, peer), inject, cap);
    /* Two counts: the entry's and the exit's. */
    sw_atomic_store_release(&g_seg_live[sslot], (uint64_t)sg->gen << 32 | 2u);
    span_publish((int)ROOT_SLOT(sslot), h0, (uint32_t)sslot);
    span_publish(s1, h1, (uint32_t)sslot);
    return h1;
}

void sw_trace_set_exec_parent(const char *sw8, size_t len)
{
    g_exec_parent.valid = false;
    if (!sw8 || !len || len >= sizeof(g_exec_raw))
        return;
    sw_sw8_decode(sw8, len, &g_exec_parent);
    if (!g_exec_parent.valid)
        return;
    memcpy(g_exec_raw, sw8, len);
    g_exec_raw_len = len;
    char base[SW_RING_NAME_MAX];
    exe_basename(base);
    char op[OP_MAX];
    size_t at = 0;
    append(op, sizeof(op), &at, "EXEC:", 5);
    append(op, sizeof(op), &at, base[0] ? base : "?", base[0] ? strlen(base) : 1);
    g_exec_op_len = copy_cut(g_exec_op, (size_t)op_threshold() + 1, op, at);
}

/*
 * An EXEC exit span of duration 0 in segment `sg` (the caller holds a count): the thread
 * execs while serving a request (vfork child, posix_spawn, or an exec replacing the serving
 * process, whose segment is then lost with the image). Returns its span id, 0 if none.
 */
static int32_t exec_exit_now(struct seg *sg, uint32_t sslot, const char *addr, size_t addr_len)
{
    int limit = sw_svc_span_limit(); /* the file's or OAP's (svcblock.h) */
    if (sw_atomic_load_relaxed(&sg->next_span_id) >= limit)
        return 0;
    int64_t now = sw_trace_now_ms();
    uint64_t h;
    int slot = span_claim_reaping(&h, now);
    if (slot < 0 || !seg_get(sslot, sg->gen)) {
        if (slot >= 0)
            pool_free(&g_span_pool, (uint32_t)slot);
        return 0;
    }
    struct span *sp = &g_spans[slot];
    sp->span_id = atomic_fetch_add_explicit(&sg->next_span_id, 1, memory_order_relaxed);
    sp->parent_id = 0;
    sp->type = SW_SPAN_EXIT;
    sp->layer = SW_LAYER_UNKNOWN;
    sp->recorded = true;
    sp->start_ms = now;
    char op[OP_MAX];
    var_named(sp, op, exec_op(op, addr + 5, addr_len - 5), addr,
              addr_len < PEER_MAX - 1 ? addr_len : PEER_MAX - 1);
    int32_t id = sp->span_id;
    span_publish(slot, h, sslot);
    struct span_end e = {0, false, NULL, NULL, now};
    span_end(h, &e);
    return id;
}

struct sw_ring *sw_trace_ring(void)
{
    return g_ready && !tls_ring_making ? ring_get() : NULL;
}

bool sw_trace_log_ctx(struct sw_trace_logctx *out)
{
    if (!g_ready)
        return false;
    uint64_t cur = current_resolve();
    int sslot = cur ? seg_join(cur) : -1;
    if (sslot < 0)
        return false;
    struct seg *sg = &g_segs[sslot];
    bool ok = sg->sampled || (sw_atomic_load_acquire(&sg->flags) & SEG_KEPT);
    if (ok) {
        out->tid = sg->tid;
        out->seg_value = sg->seg_value;
        out->span_id = 0; /* the entry span: the request's own */
        out->own_trace = !sg->has_ref;
        if (sg->has_ref) {
            out->trace_len =
                copy_cut(out->trace_id, sizeof(out->trace_id), sg->ref.trace_id, sg->ref.len[0]);
        } else {
            out->trace_value = sg->trace_value;
            out->trace_len = 0;
        }
    }
    seg_put((uint32_t)sslot);
    return ok;
}

size_t sw_trace_exec_context(char *out, size_t cap, const char *path)
{
    if (!g_ready || !out || cap == 0)
        return 0;
    char addr[PEER_MAX];
    size_t at = 0;
    const char *base = path ? strrchr(path, '/') : NULL;
    base = base ? base + 1 : (path ? path : "");
    append(addr, sizeof(addr) - 1, &at, "exec:", 5);
    append(addr, sizeof(addr) - 1, &at, base, strnlen(base, sizeof(addr) - 6));
    /* Not cut inside a UTF-8 sequence: these bytes are both our sw8 field 8 and a peer. */
    if (at == sizeof(addr) - 1)
        while (at > 5 && ((unsigned char)addr[at] & 0xc0u) == 0x80u)
            at--;
    addr[at] = '\0';

    uint64_t cur = current_resolve();
    int sslot = cur ? seg_join(cur) : -1;
    if (sslot < 0 && cur && unsampled_entry(cur))
        return 0; /* serving an unsampled request */
    if (sslot >= 0) {
        struct seg *sg = &g_segs[sslot];
        size_t n = 0;
        if (sg->sampled) {
            int32_t id = exec_exit_now(sg, (uint32_t)sslot, addr, at);
            char trace_id[SW_ID_MAX], seg_id[SW_ID_MAX], endpoint[OP_MAX];
            seg_id_texts(sg, trace_id, seg_id);
            seg_endpoint(sg, endpoint);
            n = sw_sw8_encode(out, cap, trace_id, seg_id, id, g_cfg->service_name,
                              g_cfg->instance_name, endpoint, addr);
        }
        seg_put((uint32_t)sslot);
        return n;
    }
    if (g_fork_parent.valid) {
        int32_t id = 0;
        if (g_fork_parent.xslot && g_xslots) {
            /* Tell the parent which program its EXEC exit span called (see g_xslots). */
            struct exec_slot *x = &g_xslots[g_fork_parent.xslot - 1];
            uint64_t g = g_fork_parent.xgen;
            uint64_t v = sw_atomic_load_acquire(&x->state);
            if ((v == (g << 2 | XS_CLAIMED) || v == (g << 2 | XS_DONE)) &&
                sw_atomic_cas_acq_rel(&x->state, &v, g << 2 | XS_WRITING)) {
                memcpy(x->addr, addr, at);
                x->len = (uint16_t)at;
                uint64_t w = g << 2 | XS_WRITING;
                if (sw_atomic_cas_acq_rel(&x->state, &w, g << 2 | XS_DONE))
                    id = g_fork_parent.span_id;
            }
        }
        return sw_sw8_encode(out, cap, g_fork_parent.trace_id, g_fork_parent.seg_id, id,
                             g_cfg->service_name, g_cfg->instance_name, g_fork_parent.endpoint,
                             addr);
    }
    if (g_exec_parent.valid && g_exec_raw_len < cap &&
        sw_trace_now_ms() - g_start_ms < EXEC_CTX_MS) {
        memcpy(out, g_exec_raw, g_exec_raw_len);
        return g_exec_raw_len;
    }
    return 0;
}

/*
 * agent.cluster (the Java agent's rule since 8.10): an exit span's peer is `<cluster>/<peer>`,
 * and so is sw8 field 8 (it is made from the span's peer), so the callee's ref still names the
 * caller's exit peer byte for byte. The url tag keeps the address the request went to. `*out`
 * is a copy of `*req` with the peer in `buf` (PEER_MAX bytes).
 */
static SW_NOINLINE const struct sw_req_info *cluster_peer(const struct sw_req_info *req,
                                                          struct sw_req_info *out, char *buf)
{
    size_t cl = strnlen(g_cfg->cluster, sizeof(g_cfg->cluster));
    size_t n = cl + 1 + req->peer_len < PEER_MAX - 1 ? cl + 1 + req->peer_len : PEER_MAX - 1;
    *out = *req;
    if (!out->host) { /* the url's host: the address itself, as without a cluster */
        out->host = req->peer;
        out->host_len = req->peer_len;
    }
    memcpy(buf, g_cfg->cluster, cl < n ? cl : n);
    if (cl < n)
        buf[cl] = '/';
    if (cl + 1 < n)
        memcpy(buf + cl + 1, req->peer, n - cl - 1);
    buf[n] = '\0';
    out->peer = buf;
    out->peer_len = n;
    return out;
}

SW_HOT uint64_t sw_trace_exit_start(const struct sw_req_info *req, int64_t start_ms, char *inject,
                                    size_t cap, size_t *inject_len)
{
    return sw_trace_exit_start_in(g_ready ? current_resolve() : 0, req, start_ms, inject, cap,
                                  inject_len);
}

/* The tag of an exit whose request is not known (a root exit segment of its own). */
static SW_NOINLINE void parent_unknown_tag(struct span *sp)
{
    struct sw_wbuf w;
    sw_wbuf_init(&w, sp->ctags, sizeof(sp->ctags));
    sw_wbuf_str(&w, "swagent.parent", 14);
    sw_wbuf_str(&w, "unknown", 7);
    if (!w.overflow) {
        sp->ctags_n = 1;
        sp->ctags_len = (uint16_t)w.len;
    }
}

void sw_trace_count_given_up(void)
{
    struct sw_ring *r = ring_get();
    if (r)
        sw_ring_count_given_up(r);
}

/* An exit whose request is not known: counted here and in the ring (`swagent status`). */
static SW_NOINLINE void parent_unknown_count(void)
{
    sw_atomic_add_relaxed(&g_parent_unknown, 1);
    struct sw_ring *r = ring_get();
    if (r)
        sw_ring_count_parent_unknown(r);
}

static void span_rpc(struct span *sp, const char *op, size_t opl);
/*
 * The segment a new exit of `parent` (sw_trace_exit_start_in, sw_trace_db_start_in) joins:
 * its slot, holding a count, or -1 (*unknown: no request is known, the exit is a root exit
 * segment of its own and counted as such), or -2 (an unsampled request without
 * correlation: no span, nothing to send).
 */
static inline __attribute__((always_inline)) int exit_join(uint64_t parent, bool *unknown)
{
    *unknown = parent == SW_TRACE_UNKNOWN;
    uint64_t cur = *unknown ? 0 : parent;
    int sslot = cur ? seg_join(cur) : -1;
    if (sslot < 0 && cur) {
        if (unsampled_entry(cur))
            return -2;
        *unknown = true; /* its request ended: no other one is taken instead */
    }
    if (SW_UNLIKELY(*unknown))
        parent_unknown_count();
    return sslot;
}

/* A span of joined segment `sg` for an exit: its id (*id) within agent.span_limit_per_segment
 * and a pool slot (*h its handle), or -1: the segment is marked size-limited, the drop counted. */
static inline __attribute__((always_inline)) int exit_span_claim(struct seg *sg, int64_t start_ms,
                                                                 uint64_t *h, int32_t *id)
{
    *id = atomic_fetch_add_explicit(&sg->next_span_id, 1, memory_order_relaxed);
    int slot = -1;
    if (*id >= sw_svc_span_limit()) { /* the file's or OAP's (svcblock.h) */
        atomic_fetch_or_explicit(&sg->flags, SW_REC_SEG_SIZE_LIMITED, memory_order_relaxed);
        sw_atomic_add_relaxed(&g_limited, 1);
    } else {
        slot = span_claim_reaping(h, start_ms);
        if (slot < 0) {
            atomic_fetch_or_explicit(&sg->flags, SW_REC_SEG_SIZE_LIMITED, memory_order_relaxed);
            sw_atomic_add_relaxed(&g_spans_dropped, 1);
        }
    }
    return slot;
}

/* The segment of a root exit of a new trace, sampled as any new trace (agent.sample_n_per_3_secs
 * in force): claimed, ids drawn, its root (*h) an exit recorded; NULL when none. */
static inline __attribute__((always_inline)) struct seg *
exit_root_claim(const struct sw_eff *e, int64_t start_ms, uint64_t *h, int *sslot)
{
    if (!sw_sampler_try(e->quota, e->sample_n_per_3_secs, start_ms) || !ring_admits())
        return NULL;
    *sslot = seg_claim_reaping(h, start_ms);
    if (*sslot < 0) {
        sw_atomic_add_relaxed(&g_dropped, 1);
        return NULL;
    }
    struct seg *sg = &g_segs[*sslot];
    sg->sampled = true;
    seg_new_ids(sg, start_ms);
    sg->root.type = SW_SPAN_EXIT;
    sg->root.recorded = true;
    return sg;
}

SW_HOT uint64_t sw_trace_exit_start_in(uint64_t parent, const struct sw_req_info *req,
                                       int64_t start_ms, char *inject, size_t cap,
                                       size_t *inject_len)
{
    size_t dummy;
    if (!inject_len)
        inject_len = &dummy;
    *inject_len = 0;
    if (SW_UNLIKELY(!g_ready || !req))
        return 0;
    struct sw_req_info creq;
    char cpeer[PEER_MAX];
    if (SW_UNLIKELY(g_lim.cluster) && req->peer)
        req = cluster_peer(req, &creq, cpeer);

    bool unknown;
    int sslot = exit_join(parent, &unknown);
    if (sslot == -2)
        return 0; /* an unsampled request without correlation: nothing to send or record */
    if (sslot >= 0) {
        /* A child of the current request's entry span (span 0); we hold one count. */
        struct seg *sg = &g_segs[sslot];
        if (!sg->sampled && !sg->keep) {
            *inject_len = inject_headers(sg, 0, NULL, inject, cap);
            seg_put((uint32_t)sslot);
            return 0;
        }
        uint64_t h = 0;
        int32_t id;
        int slot = exit_span_claim(sg, start_ms, &h, &id);
        if (slot < 0) {
            /* Not recorded: still propagate, naming the entry span as the parent. */
            char peer[PEER_MAX];
            copy_peer(peer, req);
            *inject_len = inject_headers(sg, 0, peer, inject, cap);
            seg_put((uint32_t)sslot);
            return 0;
        }
        struct span *sp = &g_spans[slot];
        sp->span_id = id;
        sp->parent_id = 0;
        sp->type = SW_SPAN_EXIT;
        sp->recorded = true;
        span_fill(sp, req, start_ms, req->host ? req->host : req->peer,
                  req->host ? req->host_len : (req->peer ? req->peer_len : 0), NULL, 0);
        if (SW_UNLIKELY(req->rpc_op != NULL))
            span_rpc(sp, req->rpc_op, req->rpc_op_len);
        char peer[PEER_MAX];
        *inject_len = inject_headers(sg, id, span_peer(sp, peer), inject, cap);
        span_publish(slot, h, (uint32_t)sslot);
        return h;
    }

    /* No current request, but this process was exec'ed while its parent served one. */
    if (!unknown && g_exec_parent.valid && start_ms - g_start_ms < EXEC_CTX_MS)
        return exec_child_exit(req, start_ms, inject, cap, inject_len);

    /* No current request: a root exit segment of a new trace. As with an entry (and as the
     * Java agent does for the first operation of a context), agent.ignore_suffix is checked
     * first: an ignored path starts no trace, sends no sw8 and uses no sampling budget. */
    size_t plen = 0;
    const char *path = NULL;
    const struct sw_eff *e = sw_svc_eff();
    if (e->ignore_suffix->n > 0) {
        path = target_path(req->target, req->target_len, &plen);
        if (sw_cfg_list_ignored_path(e->ignore_suffix, path, plen))
            return 0;
    }
    uint64_t h;
    struct seg *sg = exit_root_claim(e, start_ms, &h, &sslot);
    if (!sg)
        return 0;
    struct span *sp = &sg->root;
    span_fill(sp, req, start_ms, req->host ? req->host : req->peer,
              req->host ? req->host_len : (req->peer ? req->peer_len : 0), path, plen);
    if (SW_UNLIKELY(unknown))
        parent_unknown_tag(sp);
    root_image(sg, sp);
    if (SW_UNLIKELY(req->rpc_op != NULL)) /* before sw8: its field 7 names this span */
        span_rpc(sp, req->rpc_op, req->rpc_op_len);
    char peer[PEER_MAX];
    *inject_len = inject_headers(sg, 0, span_peer(sp, peer), inject, cap);
    seg_publish((uint32_t)sslot);
    span_publish((int)ROOT_SLOT(sslot), h, (uint32_t)sslot);
    return h;
}

SW_HOT void sw_trace_exit_finish(uint64_t h, int status_code, int64_t end_ms)
{
    struct span_end e = {status_code, status_code >= 400, NULL, NULL, end_ms};
    span_end(h, &e);
}

void sw_trace_exit_error(uint64_t h, const char *error_kind, const char *message, int64_t end_ms)
{
    struct span_end e = {0, true, error_kind ? error_kind : "error", message, end_ms};
    span_end(h, &e);
}

static void span_rpc(struct span *sp, const char *op, size_t opl);

/*
 * Issue 37 (gRPC): open span `h` becomes an RPC span: operation name `op`, layer RPCFramework,
 * component GRPC (23), the status tag rpc.status_code (sw_trace_rpc_finish); its peer stays.
 * Spans that record nothing (unsampled), or a keepable request's root (its names are made
 * from the request when it is kept), are left as they are. Called by the span's owner while it
 * is open; exits started after it name the new operation in their sw8 (field 7).
 */
void sw_trace_span_rpc(uint64_t h, const char *op, size_t opl)
{
    uint32_t slot = (uint32_t)h & ~SW_TRACE_KEEP_BIT;
    if (h == 0 || slot >= ALL_SPAN_SLOTS || !g_ready || !op || !opl)
        return;
    if (atomic_load_explicit(&g_span_hot[slot].state, memory_order_relaxed) != h)
        return;
    struct span *sp = span_at((int)slot);
    if (!sp->recorded || (slot >= SPAN_SLOTS && g_segs[slot - SPAN_SLOTS].keep))
        return;
    span_rpc(sp, op, opl);
}

/* sw_trace_span_rpc's change of a span (recorded, open, its owner's). */
static void span_rpc(struct span *sp, const char *op, size_t opl)
{
    char peer[PEER_MAX];
    size_t pl = sp->peer_len < PEER_MAX ? sp->peer_len : PEER_MAX - 1;
    memcpy(peer, SPAN_VAR(sp) + sp->peer_off, pl);
    var_named(sp, op, fit_len(op, opl, (size_t)op_threshold()), peer, pl);
    sp->layer = SW_LAYER_RPC;
    sp->component = SW_TRACE_COMPONENT_GRPC;
    sp->hdr_len = 0; /* no prebuilt record: the general writer (seg_commit_root) */
    sp->xtags_len = 0;
    sp->xtags_n = 0;
    sp->rpc = true;
}

void sw_trace_rpc_finish(uint64_t h, int status, const char *message, int64_t end_ms)
{
    struct span_end e = {status, status != 0, status != 0 ? "grpc" : NULL, message, end_ms};
    sw_profile_end(h);
    span_end(h, &e);
}

void sw_trace_get_stats(struct sw_trace_stats *out)
{
    out->segments_committed = sw_atomic_load_relaxed(&g_committed);
    out->segments_dropped = sw_atomic_load_relaxed(&g_dropped);
    out->segments_shed = sw_atomic_load_relaxed(&g_shed);
    out->spans_limited = sw_atomic_load_relaxed(&g_limited);
    out->spans_dropped = sw_atomic_load_relaxed(&g_spans_dropped);
    out->spans_reaped = sw_atomic_load_relaxed(&g_reaped);
    out->parent_unknown = sw_atomic_load_relaxed(&g_parent_unknown);
    out->kept_errors = sw_atomic_load_relaxed(&g_keep[SW_RING_KEPT_ERROR]);
    out->kept_slow = sw_atomic_load_relaxed(&g_keep[SW_RING_KEPT_SLOW]);
    out->keep_limited = sw_atomic_load_relaxed(&g_keep[SW_RING_KEEP_LIMITED]);
}

/* ---------------------------------------------------------------- database and cache exits */

/* agent.cluster for database and cache exits (cluster_peer's rule): `<cluster>/<peer>` (peer
 * `pl` bytes) into buf (PEER_MAX bytes), cut to fit; its length. */
static SW_NOINLINE size_t cluster_db_peer(char *buf, const char *peer, size_t pl)
{
    if (pl > PEER_MAX - 1)
        pl = PEER_MAX - 1;
    size_t cl = strnlen(g_cfg->cluster, sizeof(g_cfg->cluster));
    if (cl + 1 >= PEER_MAX - 1) {
        memcpy(buf, peer, pl);
        return pl;
    }
    size_t keep = pl < PEER_MAX - 1 - cl - 1 ? pl : PEER_MAX - 1 - cl - 1;
    memcpy(buf, g_cfg->cluster, cl);
    buf[cl] = '/';
    memcpy(buf + cl + 1, peer, keep);
    return cl + 1 + keep;
}

/*
 * The names and tags of a database or cache exit (FORM_NAMED), written into its span: str
 * operation name (d->op, then d->op_name); str peer; 2 bytes for the tag count (db_image) and
 * the tags (SPAN_XTAGS), as many as fit.
 */
static void db_fill(struct span *sp, const struct sw_db_info *d)
{
    sp->layer = d->layer;
    sp->component = d->component;
    sp->form = FORM_NAMED;
    uint8_t *v = SPAN_VAR(sp);
    size_t ol = fit_len(d->op, d->op_len, g_lim.op), nl = 0;
    if (d->op_name)
        nl = fit_len(d->op_name, d->op_name_len, g_lim.op - ol);
    uint8_t *q = w_u16(v, (uint16_t)(ol + nl));
    copy_small(q, d->op, ol);
    copy_small(q + ol, d->op_name, nl);
    q += ol + nl;
    const char *peer = d->peer;
    size_t pl = d->peer ? fit_len(d->peer, d->peer_len, g_lim.peer) : 0;
    char cbuf[PEER_MAX];
    if (SW_UNLIKELY(g_lim.cluster) && pl) {
        pl = cluster_db_peer(cbuf, peer, pl);
        peer = cbuf;
    }
    sp->op_len = (uint16_t)(ol + nl);
    sp->peer_off = (uint16_t)(q - v + 2);
    sp->peer_len = (uint16_t)pl;
    q = w_str_cut(q, peer, pl);
    sp->var_len = (uint16_t)(q - v);
    /* tags, as many as fit the rest of the image (6 bytes kept for the counts of db_image) */
    uint8_t *t = q + 2;
    size_t room = sizeof(sp->img) - (size_t)(t - sp->img) - 6, at = 0;
    unsigned n = 0;
    /* The usual: all fit as they are (no cut, no dots): copied without further checks. */
    size_t need = 0;
    bool keys_ok = d->ntags <= 255 && !d->dots;
    for (unsigned i = 0; i < d->ntags; i++) {
        need += 4 + d->tags[i].key_len + d->tags[i].val_len;
        keys_ok &= d->tags[i].key_len <= 64;
    }
    if (SW_LIKELY(keys_ok && need <= room)) {
        for (unsigned i = 0; i < d->ntags; i++) {
            t = w_str_cut(t, d->tags[i].key, d->tags[i].key_len);
            t = w_str_cut(t, d->tags[i].val, d->tags[i].val_len);
        }
        sp->xtags_n = (uint8_t)d->ntags;
        sp->xtags_len = (uint16_t)need;
        return;
    }
    uint32_t dots = d->dots;
    for (unsigned i = 0; i < d->ntags && n < 255; i++, dots >>= 1) {
        const struct sw_tag *g = &d->tags[i];
        size_t kl = fit_len(g->key, g->key_len, 64);
        size_t dl = (dots & 1u) * 3, vl = g->val_len + dl;
        if (SW_UNLIKELY(vl > 0xffff || 4 + kl + vl > room - at)) {
            if (room - at <= 4 + kl + 3)
                continue;
            size_t max = room - at - 4 - kl < 0xffff ? room - at - 4 - kl : 0xffff;
            if (vl > max) { /* cut to what is left, the dots first */
                dl = dl > max ? max : dl;
                vl = fit_len(g->val, g->val_len, max - dl) + dl;
            }
        }
        t = w_str_cut(t, g->key, kl);
        t = w_u16(t, (uint16_t)vl);
        copy_small(t, g->val, vl - dl);
        t += vl;
        if (SW_UNLIKELY(dl))
            memcpy(t - dl, "...", dl);
        at += 4 + kl + vl;
        n++;
    }
    sp->xtags_n = (uint8_t)n;
    sp->xtags_len = (uint16_t)at;
}

/*
 * A root database or cache exit's whole record prebuilt (as root_image_usual does for an
 * entry): the record header (own ids and trace, one span) before its fixed fields, which end
 * where its names begin (SPAN_VAR: 5 bytes later than a FORM_HTTP span's, which has a status
 * and http flags), the tag count before its tags and the ref and log counts (0) after them;
 * root_image_end patches the end time and flags. Not when it has other tags (ctags).
 */
static inline void db_image(const struct seg *sg, struct span *sp)
{
    if (SW_UNLIKELY(sp->ctags_len))
        return;
    enum { HL = 2 + 16 + 4 + 8 + 8 + 2 };
    uint8_t *f = SPAN_VAR(sp) - 32, *q = f - HL;
    q[0] = SW_REC_VERSION;
    q[1] = SW_REC_SEG_OWN_IDS | SW_REC_SEG_OWN_TRACE;
    memcpy(q + 2, g_uuid, 16);
    w_u32(q + 18, sg->tid);
    w_u64(q + 22, sg->seg_value);
    w_u64(q + 30, sg->trace_value);
    w_u16(q + 38, 1);                     /* spans */
    w_u64(f, (uint64_t)UINT32_MAX << 32); /* span id 0, parent -1 */
    w_u64(f + 8, (uint64_t)sp->start_ms);
    /* type, layer, flags (root_image_end), form, component */
    w_u64(f + 24, (uint64_t)sp->type | (uint64_t)sp->layer << 8 | (uint64_t)FORM_NAMED << 24 |
                      (uint64_t)(uint32_t)sp->component << 32);
    uint8_t *t = SPAN_VAR(sp) + sp->var_len;
    w_u16(t, sp->xtags_n);
    w_u32(t + 2 + sp->xtags_len, 0); /* refs, logs */
    sp->hdr_len = HL;
    sp->img_len = (uint16_t)(HL + 32 + sp->var_len + 2 + sp->xtags_len + 4);
}

SW_HOT uint64_t sw_trace_db_start_in(uint64_t parent, const struct sw_db_info *d, int64_t start_ms)
{
    if (SW_UNLIKELY(!g_ready || !d))
        return 0;
    bool unknown;
    int sslot = exit_join(parent, &unknown);
    if (sslot == -2)
        return 0;
    uint64_t h = 0;
    if (sslot >= 0) {
        /* A child of the request's entry span. Not in a segment that is not sampled, unless
         * it is keepable: as its HTTP exits, its database exits are recorded in case it is
         * kept (a kept slow request shows the calls it waited on; a failed command marks it
         * as failed, keep_at_end). */
        struct seg *sg = &g_segs[sslot];
        int32_t id;
        int slot = SW_LIKELY(sg->sampled) || sg->keep ? exit_span_claim(sg, start_ms, &h, &id) : -1;
        if (slot < 0) {
            seg_put((uint32_t)sslot);
            return 0;
        }
        struct span *sp = &g_spans[slot];
        sp->span_id = id;
        sp->parent_id = 0;
        sp->type = SW_SPAN_EXIT;
        sp->recorded = true;
        sp->start_ms = start_ms;
        db_fill(sp, d);
        span_publish(slot, h, (uint32_t)sslot);
        return h;
    }
    /* No request: a root exit segment of a new trace. */
    struct seg *sg = exit_root_claim(sw_svc_eff(), start_ms, &h, &sslot);
    if (!sg)
        return 0;
    struct span *sp = &sg->root;
    sp->start_ms = start_ms;
    db_fill(sp, d);
    if (SW_UNLIKELY(unknown))
        parent_unknown_tag(sp);
    db_image(sg, sp);
    seg_publish((uint32_t)sslot);
    span_publish((int)ROOT_SLOT(sslot), h, (uint32_t)sslot);
    return h;
}

SW_HOT void sw_trace_db_finish(uint64_t h, const char *error_kind, const char *message,
                               int64_t end_ms)
{
    struct span_end e = {0, error_kind != NULL, error_kind, message, end_ms};
    span_end(h, &e);
}
