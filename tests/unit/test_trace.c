/*
 * test_trace.c - unit tests of agent/trace.c: spans and segments end to end, through a real
 * ring in a temporary directory that is read back with the consumer API and parsed here
 * (record.h layout, exact parse: every byte accounted for).
 *
 * Built with SW_TESTING (trace.c's test hooks), with the real config, log, ring, propagation,
 * sampler and id modules. sw_spawn_reporter is replaced by a counting stub.
 */
#include "common.h"

#include "../check.h"
#include "config.h"
#include "propagation.h"
#include "record.h"
#include "ring.h"
#include "svcblock.h"
#include "trace.h"

#ifdef SW_TRACE_HAVE_ENCODE
#include "encode.h"
#include "language-agent/Tracing.pb-c.h"
#endif

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void sw_trace_test_limit_pools(uint32_t nseg, uint32_t nspan);
extern _Atomic uint64_t sw_trace_test_room_counts;

static _Atomic int g_spawn_calls;

int sw_spawn_reporter_in(const struct sw_config *c, const char *dir)
{
    (void)c;
    (void)dir;
    g_spawn_calls++;
    return 0;
}

/* ---------------------------------------------------------------- record parser */

#define T_STR 2048

struct tkv {
    char k[T_STR], v[T_STR];
};

struct tspan {
    int32_t id, parent;
    int64_t start, end;
    int type, layer, flags, form;
    int32_t comp;
    char op[T_STR], peer[T_STR];
    int ntags;
    struct tkv tags[8];
    int nrefs;
    int ref_type;
    char ref_tid[T_STR], ref_psid[T_STR], ref_svc[T_STR], ref_inst[T_STR], ref_ep[T_STR],
        ref_addr[T_STR];
    int32_t ref_pspan;
    int nlogs;
    int64_t log_time;
    int nkv;
    struct tkv kv[4];
};

struct tseg {
    int version, flags;
    char tid[T_STR], sid[T_STR];
    int nspans;
    struct tspan *spans;
};

struct rd {
    const uint8_t *p;
    size_t len, at;
    bool bad;
};

static uint64_t rd_n(struct rd *r, int bytes)
{
    if (r->bad || (size_t)bytes > r->len - r->at) {
        r->bad = true;
        return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)r->p[r->at + i] << (8 * i);
    r->at += (size_t)bytes;
    return v;
}

static void rd_str(struct rd *r, char *out)
{
    size_t n = (size_t)rd_n(r, 2);
    if (r->bad || n > r->len - r->at || n >= T_STR) {
        r->bad = true;
        out[0] = '\0';
        return;
    }
    memcpy(out, r->p + r->at, n);
    out[n] = '\0';
    r->at += n;
}

/* A str of the record, not copied (length in *n). */
static const char *rd_view(struct rd *r, size_t *n)
{
    *n = (size_t)rd_n(r, 2);
    if (r->bad || *n > r->len - r->at || *n >= T_STR) {
        r->bad = true;
        *n = 0;
        return "";
    }
    const char *v = (const char *)r->p + r->at;
    r->at += *n;
    return v;
}

static void add_tag(struct tspan *sp, const char *k, const char *v, size_t vn, struct rd *r)
{
    if (sp->ntags >= 8 || vn >= T_STR) {
        r->bad = true;
        return;
    }
    snprintf(sp->tags[sp->ntags].k, T_STR, "%s", k);
    memcpy(sp->tags[sp->ntags].v, v, vn);
    sp->tags[sp->ntags].v[vn] = '\0';
    sp->ntags++;
}

/*
 * A span of form HTTP (record.h): its operation name and tags, made of its parts with
 * record.h's helpers as the reporter makes them, and every length checked against its part.
 */
static void parse_http(struct rd *r, struct tspan *sp)
{
    int32_t status = (int32_t)rd_n(r, 4);
    unsigned hf = (unsigned)rd_n(r, 1);
    size_t ml, tl, hl, dl, pl;
    const char *m = rd_view(r, &ml);
    const char *t = rd_view(r, &tl);
    size_t path_off = (size_t)rd_n(r, 2), path_len = (size_t)rd_n(r, 2);
    size_t op_len = (size_t)rd_n(r, 2);
    const char *h = rd_view(r, &hl);
    size_t url_len = (size_t)rd_n(r, 2), params_len = (size_t)rd_n(r, 2);
    const char *hd = rd_view(r, &dl);
    const char *peer = rd_view(r, &pl);
    if (r->bad || (hf & ~SW_REC_HTTP_FLAGS) || path_off + path_len > tl || op_len >= T_STR) {
        r->bad = true;
        return;
    }
    if (sw_rec_http_op(sp->op, T_STR - 1, m, ml, t + path_off, path_len, op_len) != op_len)
        r->bad = true;
    sp->op[op_len] = '\0';
    memcpy(sp->peer, peer, pl);
    sp->peer[pl] = '\0';
    if (url_len) {
        char url[T_STR];
        if (url_len >= T_STR ||
            sw_rec_http_url(url, sizeof(url), hf, h, hl, t, tl, url_len) != url_len)
            r->bad = true;
        else
            add_tag(sp, "url", url, url_len, r);
    }
    if (ml)
        add_tag(sp, "http.method", m, ml, r);
    if (dl)
        add_tag(sp, "http.headers", hd, dl, r);
    if (params_len) {
        const char *q = memchr(t, '?', tl);
        if (!q || params_len > tl - (size_t)(q - t) - 1)
            r->bad = true;
        else
            add_tag(sp, "http.params", q + 1, params_len, r);
    }
    int extra = (int)rd_n(r, 2);
    for (int i = 0; i < extra && !r->bad; i++) {
        char k[T_STR], v[T_STR];
        rd_str(r, k);
        rd_str(r, v);
        add_tag(sp, k, v, strlen(v), r);
    }
    if (status > 0) {
        char txt[16];
        int n = snprintf(txt, sizeof(txt), "%d", status);
        add_tag(sp, "http.status_code", txt, (size_t)n, r);
    }
}

/* Parses one segment payload; 0 when it parses exactly to its end. Ids given as numbers are
 * turned into their text (record.h), and flags keeps only isSizeLimited. */
static int parse_seg(const void *payload, uint32_t len, struct tseg *s)
{
    struct rd r = {payload, len, 0, false};
    memset(s, 0, sizeof(*s));
    s->version = (int)rd_n(&r, 1);
    int flags = (int)rd_n(&r, 1);
    s->flags = flags & SW_REC_SEG_SIZE_LIMITED;
    if (flags & SW_REC_SEG_OWN_IDS) {
        if (r.bad || len - r.at < 16)
            return -1;
        const uint8_t *uuid = r.p + r.at;
        r.at += 16;
        uint32_t tid = (uint32_t)rd_n(&r, 4);
        uint64_t sv = rd_n(&r, 8);
        size_t n = sw_rec_id_text(s->sid, T_STR - 1, uuid, tid, sv);
        s->sid[n] = '\0';
        if (flags & SW_REC_SEG_OWN_TRACE) {
            n = sw_rec_id_text(s->tid, T_STR - 1, uuid, tid, rd_n(&r, 8));
            s->tid[n] = '\0';
        } else {
            rd_str(&r, s->tid);
        }
    } else {
        rd_str(&r, s->tid);
        rd_str(&r, s->sid);
    }
    s->nspans = (int)rd_n(&r, 2);
    if (r.bad)
        return -1;
    s->spans = calloc((size_t)s->nspans + 1, sizeof(struct tspan));
    CHECK(s->spans);
    for (int i = 0; i < s->nspans && !r.bad; i++) {
        struct tspan *sp = &s->spans[i];
        sp->id = (int32_t)rd_n(&r, 4);
        sp->parent = (int32_t)rd_n(&r, 4);
        sp->start = (int64_t)rd_n(&r, 8);
        sp->end = (int64_t)rd_n(&r, 8);
        sp->type = (int)rd_n(&r, 1);
        sp->layer = (int)rd_n(&r, 1);
        sp->flags = (int)rd_n(&r, 1);
        sp->form = (int)rd_n(&r, 1);
        sp->comp = (int32_t)rd_n(&r, 4);
        if (sp->form == SW_REC_FORM_HTTP) {
            parse_http(&r, sp);
        } else {
            if (sp->form != SW_REC_FORM_NAMED)
                return -1;
            rd_str(&r, sp->op);
            rd_str(&r, sp->peer);
            sp->ntags = (int)rd_n(&r, 2);
            for (int t = 0; t < sp->ntags && !r.bad; t++) {
                if (t >= 8)
                    return -1;
                rd_str(&r, sp->tags[t].k);
                rd_str(&r, sp->tags[t].v);
            }
        }
        sp->nrefs = (int)rd_n(&r, 2);
        if (sp->nrefs > 1)
            return -1;
        if (sp->nrefs == 1) {
            sp->ref_type = (int)rd_n(&r, 1);
            rd_str(&r, sp->ref_tid);
            rd_str(&r, sp->ref_psid);
            sp->ref_pspan = (int32_t)rd_n(&r, 4);
            rd_str(&r, sp->ref_svc);
            rd_str(&r, sp->ref_inst);
            rd_str(&r, sp->ref_ep);
            rd_str(&r, sp->ref_addr);
        }
        sp->nlogs = (int)rd_n(&r, 2);
        if (sp->nlogs > 1)
            return -1;
        if (sp->nlogs == 1) {
            sp->log_time = (int64_t)rd_n(&r, 8);
            sp->nkv = (int)rd_n(&r, 2);
            for (int k = 0; k < sp->nkv && !r.bad; k++) {
                if (k >= 4)
                    return -1;
                rd_str(&r, sp->kv[k].k);
                rd_str(&r, sp->kv[k].v);
            }
        }
    }
    return r.bad || r.at != r.len ? -1 : 0;
}

static const char *tag(const struct tspan *sp, const char *k)
{
    for (int i = 0; i < sp->ntags; i++)
        if (strcmp(sp->tags[i].k, k) == 0)
            return sp->tags[i].v;
    return NULL;
}

static const struct tspan *span_by_id(const struct tseg *s, int id)
{
    for (int i = 0; i < s->nspans; i++)
        if (s->spans[i].id == id)
            return &s->spans[i];
    return NULL;
}

/* ---------------------------------------------------------------- fixture */

static struct sw_config g_c;
static char g_root[256];
static int g_dirn;

static void setup(void)
{
    sw_trace_after_fork(); /* forget everything of the previous test (and its ring) */
    sw_config_defaults(&g_c);
    snprintf(g_c.service_name, sizeof(g_c.service_name), "svc-a");
    snprintf(g_c.instance_name, sizeof(g_c.instance_name), "inst-a");
    snprintf(g_c.runtime_dir, sizeof(g_c.runtime_dir), "%s/rt%d", g_root, ++g_dirn);
    g_c.sample_n_per_3_secs = -1;
    g_c.ignore_suffix.n = 0;
    g_c.span_limit_per_segment = 300;
    g_c.operation_name_threshold = 150;
    g_c.ring_bytes = 1 << 20;
    CHECK_EQ(sw_trace_init(&g_c), 0);
    sw_trace_test_limit_pools(0, 0);
}

/* Path of the only (or the n-th) ring file in the current runtime dir; count in *n. */
static int ring_paths(char paths[][4608], int max)
{
    DIR *d = opendir(g_c.runtime_dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "ring-", 5) == 0 && n < max)
            snprintf(paths[n++], 4608, "%s/%s", g_c.runtime_dir, e->d_name);
    }
    closedir(d);
    return n;
}

/* Reads (and releases) every record of the test's ring into *out; returns the count. */
static int read_all(struct tseg **out)
{
    char paths[4][4608];
    int np = ring_paths(paths, 4);
    *out = NULL;
    if (np == 0)
        return 0;
    CHECK_EQ(np, 1);
    struct sw_ring *r;
    CHECK_EQ(sw_ring_open(paths[0], &r), 0);
    int n = 0, cap = 0;
    struct tseg *segs = NULL;
    uint64_t cur = sw_ring_tail(r);
    for (;;) {
        const void *p;
        uint32_t len;
        uint16_t type;
        uint64_t next;
        int rc = sw_ring_peek(r, cur, &p, &len, &type, &next);
        CHECK(rc >= 0);
        if (rc == 0)
            break;
        cur = next;
        if (type != SW_REC_SEGMENT)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            segs = realloc(segs, sizeof(*segs) * (size_t)cap);
            CHECK(segs);
        }
        CHECK_EQ(parse_seg(p, len, &segs[n]), 0);
#ifdef SW_TRACE_HAVE_ENCODE
        CHECK_EQ(sw_encode_check(p, len), 0); /* the reporter's own parser agrees */
#endif
        n++;
    }
    sw_ring_release(r, cur);
    sw_ring_close(r);
    *out = segs;
    return n;
}

static void free_segs(struct tseg *s, int n)
{
    for (int i = 0; i < n; i++)
        free(s[i].spans);
    free(s);
}

static struct sw_req_info req_of(const char *method, const char *target, const char *host,
                                 const char *peer)
{
    struct sw_req_info q;
    memset(&q, 0, sizeof(q));
    q.method = method;
    q.method_len = strlen(method);
    q.target = target;
    q.target_len = strlen(target);
    /* Most requests as the connection layer gives them: the target in a buffer readable in
     * whole 16-byte blocks (padded); every third one not (the other way of reading it). */
    static __thread char pads[16][1024] __attribute__((aligned(16))); /* threads call this */
    static __thread unsigned next;
    if (q.target_len < sizeof(pads[0]) && next % 3 != 2) {
        char *b = pads[next % 16];
        memset(b, '?', sizeof(pads[0]));
        memcpy(b, target, q.target_len);
        q.target = b;
        q.padded = true;
    }
    /* Every other origin-form target with its path as the HTTP parser finds it (path_valid:
     * the entry's usual way, entry_usual), the others found by the tracer itself. */
    if (q.target_len && target[0] == '/' && next % 2 == 0) {
        size_t n = strcspn(target, "?#"), dot = 0;
        for (size_t i = 0; i < n; i++)
            dot = target[i] == '.' ? i + 1 : target[i] == '/' ? 0 : dot;
        q.path_valid = true;
        q.path_len = (uint16_t)n;
        q.path_suffix = (uint16_t)dot;
    }
    next++;
    q.host = host;
    q.host_len = host ? strlen(host) : 0;
    q.peer = peer;
    q.peer_len = peer ? strlen(peer) : 0;
    return q;
}

/* Finds header `name` in injected lines; copies its value to out. */
static bool find_hdr(const char *inj, size_t len, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);
    size_t i = 0;
    while (i < len) {
        const char *eol = memmem(inj + i, len - i, "\r\n", 2);
        CHECK(eol); /* every injected line ends in CRLF */
        size_t ll = (size_t)(eol - (inj + i));
        if (ll > nl + 2 && memcmp(inj + i, name, nl) == 0 && inj[i + nl] == ':' &&
            inj[i + nl + 1] == ' ') {
            size_t vl = ll - nl - 2;
            CHECK(vl < cap);
            memcpy(out, inj + i + nl + 2, vl);
            out[vl] = '\0';
            return true;
        }
        i += ll + 2;
    }
    return false;
}

static bool hex32_id(const char *id)
{
    int dots = 0;
    for (int i = 0; i < 32; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
            return false;
    for (const char *p = id; *p; p++)
        dots += *p == '.';
    return id[32] == '.' && dots == 2;
}

/* ---------------------------------------------------------------- tests */

static void test_entry_without_sw8(void)
{
    setup();
    struct sw_req_info q = req_of("GET", "/api/orders?id=7", "shop:8080", "10.1.2.3:5555");
    uint64_t h = sw_trace_entry_start(&q, 1700000000000);
    CHECK(h != 0);
    CHECK(sw_trace_current() == h);
    sw_trace_entry_finish(h, 200, 1700000000005);
    CHECK(sw_trace_current() == 0);

    struct tseg *s;
    CHECK_EQ(read_all(&s), 1);
    CHECK_EQ(s[0].version, SW_REC_VERSION);
    CHECK_EQ(s[0].flags, 0);
    CHECK(hex32_id(s[0].tid));
    CHECK(hex32_id(s[0].sid));
    CHECK(strcmp(s[0].tid, s[0].sid) != 0);
    CHECK_EQ(s[0].nspans, 1);
    const struct tspan *e = &s[0].spans[0];
    CHECK_EQ(e->id, 0);
    CHECK_EQ(e->parent, -1);
    CHECK_EQ(e->start, 1700000000000);
    CHECK_EQ(e->end, 1700000000005);
    CHECK_EQ(e->type, SW_SPAN_ENTRY);
    CHECK_EQ(e->layer, SW_LAYER_HTTP);
    CHECK_EQ(e->flags, 0);
    CHECK_EQ(e->comp, 49);
    CHECK_STR(e->op, "GET:/api/orders");
    CHECK_STR(e->peer, "10.1.2.3:5555");
    CHECK_EQ(e->ntags, 3);
    CHECK_STR(e->tags[0].k, "url");
    CHECK_STR(e->tags[0].v, "http://shop:8080/api/orders?id=7");
    CHECK_STR(tag(e, "http.method"), "GET");
    CHECK_STR(tag(e, "http.status_code"), "200");
    CHECK_EQ(e->nrefs, 0);
    CHECK_EQ(e->nlogs, 0);
    free_segs(s, 1);

    struct sw_trace_stats st;
    sw_trace_get_stats(&st);
    CHECK_EQ(st.segments_committed, 1);
    CHECK_EQ(st.segments_dropped, 0);
    CHECK(g_spawn_calls >= 1);
}

static void test_entry_with_sw8(void)
{
    setup();
    char sw8[SW_SW8_MAX];
    size_t n = sw_sw8_encode(sw8, sizeof(sw8), "T.1.2", "S.1.2", 3, "up-svc", "up-inst", "GET:/up",
                             "me.local:8080");
    CHECK(n > 0);
    struct sw_req_info q = req_of("POST", "/down/x", "me.local:8080", "10.0.0.7:40000");
    q.sw8 = sw8;
    q.sw8_len = n;
    q.sw8x = "1";
    q.sw8x_len = 1;
    q.headers_tag = "x-a=[1]";
    q.headers_tag_len = 7;
    uint64_t h = sw_trace_entry_start(&q, 1000);
    CHECK(h);
    sw_trace_entry_finish(h, 201, 1002);

    struct tseg *s;
    CHECK_EQ(read_all(&s), 1);
    CHECK_STR(s[0].tid, "T.1.2");
    CHECK(strcmp(s[0].sid, "S.1.2") != 0);
    const struct tspan *e = &s[0].spans[0];
    CHECK_EQ(e->nrefs, 1);
    CHECK_EQ(e->ref_type, 0);
    CHECK_STR(e->ref_tid, "T.1.2");
    CHECK_STR(e->ref_psid, "S.1.2");
    CHECK_EQ(e->ref_pspan, 3);
    CHECK_STR(e->ref_svc, "up-svc");
    CHECK_STR(e->ref_inst, "up-inst");
    CHECK_STR(e->ref_ep, "GET:/up");
    CHECK_STR(e->ref_addr, "me.local:8080");
    CHECK_EQ(e->flags, SW_REC_SPAN_SKIP_ANALYSIS);
    CHECK_STR(e->op, "POST:/down/x");
    CHECK_STR(tag(e, "http.headers"), "x-a=[1]");
    CHECK_STR(tag(e, "http.status_code"), "201");
    free_segs(s, 1);

    /* A malformed sw8 is treated as absent: new trace, no ref. */
    setup();
    q.sw8 = "1-bad";
    q.sw8_len = 5;
    q.sw8x = NULL;
    q.sw8x_len = 0;
    h = sw_trace_entry_start(&q, 1000);
    sw_trace_entry_finish(h, 200, 1001);
    CHECK_EQ(read_all(&s), 1);
    CHECK_EQ(s[0].spans[0].nrefs, 0);
    CHECK(hex32_id(s[0].tid));
    CHECK_EQ(s[0].spans[0].flags, 0);
    free_segs(s, 1);
}

static void test_exits_in_entry(void)
{
    setup();
    struct sw_req_info q = req_of("GET", "/front?a=b", "front:80", "1.2.3.4:1000");
    q.correlation = "a2V5:dmFs";
    q.correlation_len = strlen(q.correlation);
    uint64_t h = sw_trace_entry_start(&q, 5000);
    CHECK(h);

    char inj1[SW_SW8_MAX + 512], inj2[SW_SW8_MAX + 512];
    size_t l1 = 0, l2 = 0;
    struct sw_req_info x1 = req_of("POST", "/x?q=1", "backend:8080", "backend:8080");
    uint64_t e1 = sw_trace_exit_start(&x1, 5001, inj1, sizeof(inj1), &l1);
    struct sw_req_info x2 = req_of("GET", "/y", NULL, "10.0.0.9:9000");
    uint64_t e2 = sw_trace_exit_start(&x2, 5002, inj2, sizeof(inj2), &l2);
    CHECK(e1 && e2 && e1 != e2);
    CHECK(l1 > 0 && l2 > 0);
    sw_trace_exit_finish(e2, 200, 5003);
    sw_trace_exit_finish(e1, 503, 5004);
    CHECK(sw_trace_current() == h);
    sw_trace_entry_finish(h, 200, 5005);

    struct tseg *s;
    CHECK_EQ(read_all(&s), 1);
    CHECK_EQ(s[0].nspans, 3);
    /* Finish order: exit 2 (id 2), exit 1 (id 1), entry (id 0). */
    CHECK_EQ(s[0].spans[0].id, 2);
    CHECK_EQ(s[0].spans[1].id, 1);
    CHECK_EQ(s[0].spans[2].id, 0);
    const struct tspan *a = span_by_id(&s[0], 1), *b = span_by_id(&s[0], 2);
    CHECK_EQ(a->parent, 0);
    CHECK_EQ(b->parent, 0);
    CHECK_EQ(a->type, SW_SPAN_EXIT);
    CHECK_EQ(a->comp, 49);
    CHECK_EQ(a->layer, SW_LAYER_HTTP);
    CHECK_STR(a->op, "POST:/x");
    CHECK_STR(a->peer, "backend:8080");
    CHECK_STR(tag(a, "url"), "http://backend:8080/x?q=1");
    CHECK_STR(tag(a, "http.method"), "POST");
    CHECK_STR(tag(a, "http.status_code"), "503");
    CHECK_EQ(a->flags, SW_REC_SPAN_ERROR);
    CHECK_EQ(a->start, 5001);
    CHECK_EQ(a->end, 5004);
    CHECK_STR(b->op, "GET:/y");
    CHECK_STR(b->peer, "10.0.0.9:9000");
    CHECK_STR(tag(b, "url"), "http://10.0.0.9:9000/y");
    CHECK_EQ(b->flags, 0);

    char v[SW_SW8_MAX];
    struct sw_sw8 d;
    CHECK(find_hdr(inj1, l1, "sw8", v, sizeof(v)));
    sw_sw8_decode(v, strlen(v), &d);
    CHECK(d.valid);
    CHECK_STR(d.trace_id, s[0].tid);
    CHECK_STR(d.parent_segment_id, s[0].sid);
    CHECK_EQ(d.parent_span_id, 1);
    CHECK_STR(d.parent_service, "svc-a");
    CHECK_STR(d.parent_instance, "inst-a");
    CHECK_STR(d.parent_endpoint, "GET:/front");
    CHECK_STR(d.address, a->peer);
    CHECK(find_hdr(inj1, l1, "sw8-correlation", v, sizeof(v)));
    CHECK_STR(v, "a2V5:dmFs");
    CHECK(find_hdr(inj2, l2, "sw8", v, sizeof(v)));
    sw_sw8_decode(v, strlen(v), &d);
    CHECK(d.valid);
    CHECK_EQ(d.parent_span_id, 2);
    CHECK_STR(d.address, "10.0.0.9:9000");
    CHECK_STR(d.address, b->peer);
    free_segs(s, 1);

    /* Too small an inject buffer: nothing is injected, the exit is still recorded. */
    setup();
    h = sw_trace_entry_start(&q, 1);
    char tiny[8];
    size_t tl = 99;
    uint64_t e3 = sw_trace_exit_start(&x1, 2, tiny, sizeof(tiny), &tl);
    CHECK(e3);
    CHECK_EQ(tl, 0);
    sw_trace_exit_finish(e3, 200, 3);
    sw_trace_entry_finish(h, 200, 4);
    CHECK_EQ(read_all(&s), 1);
    CHECK_EQ(s[0].nspans, 2);
    free_segs(s, 1);
}

static void test_root_exit(void)
{
    setup();
    CHECK(sw_trace_current() == 0);
    char inj[SW_SW8_MAX + 64];
    size_t l = 0;
    struct sw_req_info x = req_of("GET", "/r?z", "h.example:81", "10.9.9.9:81");
    uint64_t e = sw_trace_exit_start(&x, 700, inj, sizeof(inj), &l);
    CHECK(e);
    CHECK(sw_trace_current() == 0); /* a root exit is not a "current request" */
    sw_trace_exit_finish(e, 204, 705);

    struct tseg *s;
    CHECK_EQ(read_all(&s), 1);
    CHECK_EQ(s[0].nspans, 1);
    const struct tspan *sp = &s[0].spans[0];
    CHECK_EQ(sp->id, 0);
    CHECK_EQ(sp->parent, -1);
    CHECK_EQ(sp->type, SW_SPAN_EXIT);
    CHECK_STR(sp->op, "GET:/r");
    CHECK_STR(sp->peer, "10.9.9.9:81");
    CHECK_STR(tag(sp, "url"), "http://h.example:81/r?z");
    CHECK_STR(tag(sp, "http.status_code"), "204");
    char v[SW_SW8_MAX];
    struct sw_sw8 d;
    CHECK(!find_hdr(inj, l, "sw8-correlation", v, sizeof(v)));
    CHECK(find_hdr(inj, l, "sw8", v, sizeof(v)));
    sw_sw8_decode(v, strlen(v), &d);
    CHECK(d.valid);
    CHECK_STR(d.trace_id, s[0].tid);
    CHECK_STR(d.parent_segment_id, s[0].sid);
    CHECK_EQ(d.parent_span_id, 0);
    CHECK_STR(d.parent_endpoint, "GET:/r");
    CHECK_STR(d.address, "10.9.9.9:81");
    free_segs(s, 1);
}

static void test_errors(void)
{
    setup();
    struct sw_req_info q = req_of("GET", "/boom", "a", "1.1.1.1:1");
    uint64_t h = sw_trace_entry_start(&q, 10);
    struct sw_req_info x = req_of("GET", "/dep", "dep:1", "dep:1");
    char inj[4096];
    size_t l;
    uint64_t e = sw_trace_exit_start(&x, 11, inj, sizeof(inj), &l);
    sw_trace_exit_error(e, "ECONNREFUSED", "connect refused", 12);
    sw_trace_entry_finish(h, 500, 13);

    struct tseg *s;
    CHECK_EQ(read_all(&s), 1);
    const struct tspan *en = span_by_id(&s[0], 0), *ex = span_by_id(&s[0], 1);
    CHECK(en && ex);
    CHECK_EQ(en->flags & SW_REC_SPAN_ERROR, SW_REC_SPAN_ERROR);
    CHECK_STR(tag(en, "http.status_code"), "500");
    CHECK_EQ(ex->flags & SW_REC_SPAN_ERROR, SW_REC_SPAN_ERROR);
    CHECK(tag(ex, "http.status_code") == NULL);
    CHECK_EQ(ex->nlogs, 1);
    CHECK_EQ(ex->log_time, 12);
    CHECK_EQ(ex->nkv, 3);
    CHECK_STR(ex->kv[0].k, "event");
    CHECK_STR(ex->kv[0].v, "error");
    CHECK_STR(ex->kv[1].k, "error.kind");
    CHECK_STR(ex->kv[1].v, "ECONNREFUSED");
    CHECK_STR(ex->kv[2].k, "message");
    CHECK_STR(ex->kv[2].v, "connect refused");
    free_segs(s, 1);

    /* A 399 is not an error, an aborted entry is, with a log. */
    setup();
    h = sw_trace_entry_start(&q, 10);
    sw_trace_entry_finish(h, 399, 11);
    h = sw_trace_entry_start(&q, 20);
    sw_trace_entry_abort(h, "reset", "connection reset by peer", 21);
    CHECK_EQ(read_all(&s), 2);
    CHECK_EQ(s[0].spans[0].flags, 0);
    CHECK_EQ(s[1].spans[0].flags, SW_REC_SPAN_ERROR);
    CHECK_EQ(s[1].spans[0].nkv, 3);
    CHECK_STR(s[1].spans[0].kv[1].v, "reset");
    CHECK_STR(s[1].spans[0].kv[2].v, "connection reset by peer");
    free_segs(s, 2);
}

static void test_span_limit(void)
{
    setup();
    g_c.span_limit_per_segment = 3;
    sw_svc_test_reload(); /* the file's values are read once (svcblock.h) */
    struct sw_req_info q = req_of("GET", "/many", "h", "1.1.1.1:1");
    struct sw_req_info x = req_of("GET", "/one", "d:1", "d:1");
    uint64_t h = sw_trace_entry_start(&q, 1);
    uint64_t ex[5];
    char inj[4096];
    size_t l;
    for (int i = 0; i < 5; i++) {
        ex[i] = sw_trace_exit_start(&x, 2, inj, sizeof(inj), &l);
        CHECK(l > 0); /* propagation goes on past the limit */
        char v[SW_SW8_MAX];
        struct sw_sw8 d;
        CHECK(find_hdr(inj, l, "sw8", v, sizeof(v)));
        sw_sw8_decode(v, strlen(v), &d);
        CHECK_EQ(d.parent_span_id, i < 2 ? i + 1 : 0);
    }
    CHECK(ex[0] && ex[1]);
    CHECK(ex[2] == 0 && ex[3] == 0 && ex[4] == 0);
    for (int i = 0; i < 5; i++)
        sw_trace_exit_finish(ex[i], 200, 3);
    sw_trace_entry_finish(h, 200, 4);
    struct tseg *s;
    CHECK_EQ(read_all(&s), 1);
    CHECK_EQ(s[0].nspans, 3);
    CHECK_EQ(s[0].flags, SW_REC_SEG_SIZE_LIMITED);
    free_segs(s, 1);
    struct sw_trace_stats st;
    sw_trace_get_stats(&st);
    CHECK_EQ(st.spans_limited, 3);
}

/*
 * Children that fill the segment's arena must leave room for the root span, which finishes
 * last: without it the record has no span 0 and the reporter rejects the whole segment.
 */
static void test_arena_keeps_root(void)
{
    setup();
    char target[1000];
    target[0] = '/';
    memset(target + 1, 'p', sizeof(target) - 2);
    target[sizeof(target) - 1] = '\0';
    struct sw_req_info q = req_of("GET", "/fan-out", "h", "1.1.1.1:1");
    struct sw_req_info x = req_of("GET", target, "d:1", "d:1");
    uint64_t h = sw_trace_entry_start(&q, 1);
    char inj[4096];
    size_t l;
    for (int i = 0; i < 40; i++) { /* ~40 x 1.2 KiB of exits: well past the 16 KiB arena */
        uint64_t e = sw_trace_exit_start(&x, 2, inj, sizeof(inj), &l);
        CHECK(e != 0);
        sw_trace_exit_finish(e, 200, 3);
    }
    sw_trace_entry_finish(h, 200, 4);
    struct tseg *s;
    CHECK_EQ(read_all(&s), 1);
    CHECK_EQ(s[0].flags, SW_REC_SEG_SIZE_LIMITED);
    CHECK(s[0].nspans > 1 && s[0].nspans < 41);
    free_segs(s, 1);
}

static void test_ignore_suffix(void)
{
    setup();
    g_c.ignore_suffix.n = 2;
    snprintf(g_c.ignore_suffix.item[0], SW_CFG_ITEM_MAX, "png");
    snprintf(g_c.ignore_suffix.item[1], SW_CFG_ITEM_MAX, "css");
    sw_cfg_list_index(&g_c.ignore_suffix);
    struct sw_req_info q = req_of("GET", "/img/a.png?v=2", "h", "1.1.1.1:1");
    q.correlation = "a2V5:dmFs";
    q.correlation_len = strlen(q.correlation);
    uint64_t h = sw_trace_entry_start(&q, 1);
    char inj[4096], v[SW_SW8_MAX];
    size_t l = 0;
    struct sw_req_info x = req_of("GET", "/up", "u:1", "u:1");
    uint64_t e = sw_trace_exit_start(&x, 2, inj, sizeof(inj), &l);
    CHECK(e == 0);
    CHECK(!find_hdr(inj, l, "sw8", v, sizeof(v)));
    CHECK(find_hdr(inj, l, "sw8-correlation", v, sizeof(v))); /* correlation still passes */
    sw_trace_entry_finish(h, 200, 3);
    /* Not ignored: the suffix is in the query only. */
    struct sw_req_info q2 = req_of("GET", "/page?x=a.png", "h", "1.1.1.1:1");
    h = sw_trace_entry_start(&q2, 4);
    sw_trace_entry_finish(h, 200, 5);
    struct tseg *s;
    CHECK_EQ(read_all(&s), 1);
    CHECK_STR(s[0].spans[0].op, "GET:/page");
    free_segs(s, 1);
}

/*
 * Ignored suffixes on the usual way (path information from the parser, nothing incoming) and on
 * the other (the tracer finds the path): the same answer for suffixes that pass the inline
 * filters of entry_start (length and first byte) or stop at one, case folded, and none for an
 * empty suffix or a '.' before the last '/'.
 */
static void test_ignore_suffix_usual(void)
{
    static const struct {
        const char *target;
        bool ignored;
    } cases[] = {
        {"/a.png", true},  {"/a.PNG", true},    {"/b/c.css?x=1", true}, {"/a.Css#f", true},
        {"/a.pug", false}, {"/a.cs", false},    {"/a.pngx", false},     {"/a.txt", false},
        {"/a.", false},    {"/a.png/b", false}, {"/a.p", false},        {"/a.png.gz", false},
        {"/.png", true},   {"/a.cSs", true},    {"/a.qng", false},      {"/a.pnG", true},
        {"/plain", false}, {"/a.jpg", false},
    };
    for (int valid = 0; valid < 2; valid++) {
        setup();
        g_c.ignore_suffix.n = 2;
        snprintf(g_c.ignore_suffix.item[0], SW_CFG_ITEM_MAX, "png");
        snprintf(g_c.ignore_suffix.item[1], SW_CFG_ITEM_MAX, "css");
        sw_cfg_list_index(&g_c.ignore_suffix);
        int kept = 0;
        for (size_t i = 0; i < SW_ARRAY_LEN(cases); i++) {
            const char *t = cases[i].target;
            struct sw_req_info q = req_of("GET", t, "h", "1.1.1.1:1");
            q.path_valid = valid;
            if (valid) {
                size_t n = strcspn(t, "?#"), dot = 0;
                for (size_t k = 0; k < n; k++)
                    dot = t[k] == '.' ? k + 1 : t[k] == '/' ? 0 : dot;
                q.path_len = (uint16_t)n;
                q.path_suffix = (uint16_t)dot;
            }
            uint64_t h = sw_trace_entry_start(&q, 1 + (int64_t)i);
            sw_trace_entry_finish(h, 200, 2 + (int64_t)i);
            kept += !cases[i].ignored;
        }
        struct tseg *s;
        CHECK_EQ(read_all(&s), kept);
        for (size_t i = 0, j = 0; i < SW_ARRAY_LEN(cases); i++) {
            if (cases[i].ignored)
                continue;
            char op[64];
            snprintf(op, sizeof(op), "GET:%.*s", (int)strcspn(cases[i].target, "?#"),
                     cases[i].target);
            CHECK_STR(s[j].spans[0].op, op);
            j++;
        }
        free_segs(s, kept);
    }
}

static void test_sampling(void)
{
    setup();
    /* Keeping beyond the quota off: unsampled requests record nothing (test_keep: on). */
    g_c.keep_errors = false;
    g_c.keep_slow_ms = 0;
    CHECK_EQ(sw_trace_init(&g_c), 0);
    g_c.sample_n_per_3_secs = 2;
    sw_svc_test_reload();          /* the file's values are read once (svcblock.h) */
    int64_t t0 = 3000LL * 1000000; /* the start of a 3 s window */
    struct sw_req_info q = req_of("GET", "/s", "h", "1.1.1.1:1");
    for (int i = 0; i < 20; i++) {
        uint64_t h = sw_trace_entry_start(&q, t0 + i);
        CHECK(h); /* unsampled requests get a handle too */
        sw_trace_entry_finish(h, 200, t0 + i + 1);
    }
    struct tseg *s;
    CHECK_EQ(read_all(&s), 2);
    free_segs(s, 2);

    /* Unsampled: an exit made while serving sends no sw8 and records nothing. */
    uint64_t h = sw_trace_entry_start(&q, t0 + 100);
    char inj[4096];
    size_t l = 77;
    struct sw_req_info x = req_of("GET", "/up", "u:1", "u:1");
    CHECK(sw_trace_exit_start(&x, t0 + 101, inj, sizeof(inj), &l) == 0);
    CHECK_EQ(l, 0);
    sw_trace_entry_finish(h, 200, t0 + 102);
    /* Unsampled root exits likewise. */
    CHECK(sw_trace_exit_start(&x, t0 + 103, inj, sizeof(inj), &l) == 0);
    CHECK_EQ(l, 0);

    /* A valid incoming sw8 is always kept, over the budget. */
    char sw8[SW_SW8_MAX];
    size_t n = sw_sw8_encode(sw8, sizeof(sw8), "T.9", "S.9", 0, "u", "ui", "GET:/", "h");
    struct sw_req_info q2 = q;
    q2.sw8 = sw8;
    q2.sw8_len = n;
    for (int i = 0; i < 5; i++) {
        h = sw_trace_entry_start(&q2, t0 + 200 + i);
        sw_trace_entry_finish(h, 200, t0 + 201 + i);
    }
    CHECK_EQ(read_all(&s), 5);
    for (int i = 0; i < 5; i++)
        CHECK_STR(s[i].tid, "T.9");
    free_segs(s, 5);

    /* Next window: the budget is back. */
    for (int i = 0; i < 4; i++) {
        h = sw_trace_entry_start(&q, t0 + 3000 + i);
        sw_trace_entry_finish(h, 200, t0 + 3001 + i);
    }
    CHECK_EQ(read_all(&s), 2);
    free_segs(s, 2);
}

/* The value of tag `k` of a span, or NULL. */
static const char *span_tag(const struct tspan *sp, const char *k)
{
    for (int i = 0; i < sp->ntags && i < 8; i++)
        if (strcmp(sp->tags[i].k, k) == 0)
            return sp->tags[i].v;
    return NULL;
}

/* A keepable request (sampled out) with one exit that ends (200, or failed when `fail`). */
static uint64_t keep_req(const struct sw_req_info *q, int64_t t, bool fail)
{
    struct sw_req_info x = req_of("GET", "/up", "u:1", "u:1");
    char inj[4096];
    size_t l = 77;
    uint64_t h = sw_trace_entry_start(q, t);
    CHECK(sw_trace_entry_unrecorded(h) && sw_trace_entry_keepable(h));
    uint64_t e = sw_trace_exit_start(&x, t + 1, inj, sizeof(inj), &l);
    CHECK(e != 0);  /* recorded in case the request is kept */
    CHECK_EQ(l, 0); /* but no sw8: it is not sampled */
    if (fail)
        sw_trace_exit_error(e, "ECONNREFUSED", "connect failed", t + 2);
    else
        sw_trace_exit_finish(e, 200, t + 2);
    return h;
}

/* Keeping beyond the quota (trace.c): unsampled requests that end badly are kept, whole, within
 * swagent.keep_n_per_3_secs; the others record nothing. */
static void test_keep(void)
{
    setup();
    g_c.sample_n_per_3_secs = 1;
    g_c.keep_slow_ms = 500;
    g_c.keep_n_per_3_secs = 3;
    CHECK_EQ(sw_trace_init(&g_c), 0);
    int64_t t0 = 3000LL * 1000001; /* the start of a 3 s window */
    struct sw_req_info q = req_of("GET", "/k", "h", "1.1.1.1:1");
    uint64_t h = sw_trace_entry_start(&q, t0); /* sampled */
    CHECK(!sw_trace_entry_unrecorded(h) && !sw_trace_entry_keepable(h));
    sw_trace_entry_finish(h, 200, t0 + 1);
    /* Fine: not kept (its response followed or not). */
    h = keep_req(&q, t0 + 10, false);
    CHECK(!sw_trace_entry_respond(h, 200, t0 + 13));
    sw_trace_entry_finish(h, 0, t0 + 900); /* unfollowed: no status, a late end: not slow */
    h = keep_req(&q, t0 + 20, false);
    sw_trace_entry_finish(h, 404, t0 + 23);
    /* A 5xx at the first write: kept. */
    h = keep_req(&q, t0 + 30, false);
    CHECK(sw_trace_entry_respond(h, 503, t0 + 33));
    CHECK(sw_trace_entry_respond(h, 503, t0 + 33)); /* asked again: still kept, counted once */
    sw_trace_entry_finish(h, 503, t0 + 34);
    /* A failed exit, a 200 answer: kept. */
    h = keep_req(&q, t0 + 40, true);
    CHECK(sw_trace_entry_respond(h, 200, t0 + 43));
    sw_trace_entry_finish(h, 200, t0 + 44);
    /* Slow: its response began 600 ms after it. */
    h = keep_req(&q, t0 + 50, false);
    CHECK(sw_trace_entry_respond(h, 200, t0 + 650));
    sw_trace_entry_finish(h, 200, t0 + 651);
    /* Over the keep limit: not kept, counted once (at the first write and again at the end). */
    h = keep_req(&q, t0 + 700, false);
    CHECK(!sw_trace_entry_respond(h, 500, t0 + 703));
    sw_trace_entry_finish(h, 500, t0 + 704);
    /* Next window: a reset (abort) ends a keepable request: kept at its end. */
    h = sw_trace_entry_start(&q, t0 + 3000); /* sampled */
    sw_trace_entry_finish(h, 200, t0 + 3001);
    h = keep_req(&q, t0 + 3010, false);
    sw_trace_entry_abort(h, "ECONNRESET", "connection error", t0 + 3013);

    struct tseg *s;
    CHECK_EQ(read_all(&s), 6);
    static const char *const kept[6] = {NULL, "error", "error", "slow", NULL, "error"};
    static const int64_t starts[6] = {0, 30, 40, 50, 3000, 3010};
    for (int i = 0; i < 6; i++) {
        struct tspan *root = NULL, *ex = NULL;
        for (int k = 0; k < s[i].nspans; k++) {
            if (s[i].spans[k].id == 0)
                root = &s[i].spans[k];
            else
                ex = &s[i].spans[k];
        }
        CHECK(root != NULL && root->parent == -1 && root->start == t0 + starts[i]);
        CHECK_STR(root->op, "GET:/k"); /* the names of a kept one made from its saved request */
        CHECK_STR(root->peer, "1.1.1.1:1");
        CHECK(span_tag(root, "url") && strcmp(span_tag(root, "url"), "http://h/k") == 0);
        const char *why = span_tag(root, "swagent.kept");
        CHECK(kept[i] ? why && strcmp(why, kept[i]) == 0 : why == NULL);
        if (kept[i]) { /* whole: its exit, child of the entry */
            CHECK_EQ(s[i].nspans, 2);
            CHECK(ex != NULL && ex->id == 1 && ex->parent == 0 && ex->start == root->start + 1);
            CHECK_STR(ex->op, "GET:/up");
        }
    }
    CHECK(s[1].spans[0].id == 1 || s[1].spans[1].id == 1);
    free_segs(s, 6);
    struct sw_trace_stats st;
    sw_trace_get_stats(&st);
    CHECK_EQ(st.kept_errors, 3);
    CHECK_EQ(st.kept_slow, 1);
    CHECK_EQ(st.keep_limited, 1);
}

static void test_entry_waits_for_open_exit(void)
{
    setup();
    struct sw_req_info q = req_of("GET", "/w", "h", "1.1.1.1:1");
    struct sw_req_info x = req_of("GET", "/slow", "d:1", "d:1");
    uint64_t h = sw_trace_entry_start(&q, 1);
    char inj[4096];
    size_t l;
    uint64_t e = sw_trace_exit_start(&x, 2, inj, sizeof(inj), &l);
    sw_trace_entry_finish(h, 200, 3);
    struct tseg *s;
    CHECK_EQ(read_all(&s), 0); /* the segment waits for its open exit */
    sw_trace_exit_finish(e, 200, 4);
    CHECK_EQ(read_all(&s), 1);
    CHECK_EQ(s[0].nspans, 2);
    CHECK_EQ(s[0].spans[0].id, 0);
    CHECK_EQ(s[0].spans[1].id, 1);
    CHECK_EQ(s[0].spans[1].end, 4);
    free_segs(s, 1);
}

static void test_event_loop_current(void)
{
    setup();
    struct sw_req_info qa = req_of("GET", "/a", "h", "1.1.1.1:1");
    struct sw_req_info qb = req_of("GET", "/b", "h", "1.1.1.1:2");
    struct sw_req_info x = req_of("GET", "/up", "u:1", "u:1");
    uint64_t a = sw_trace_entry_start(&qa, 1);
    uint64_t b = sw_trace_entry_start(&qb, 2);
    CHECK(sw_trace_current() == b);
    CHECK(sw_trace_set_current(a) == b);
    CHECK(sw_trace_current() == a);
    CHECK(sw_trace_set_current(b) == a);
    sw_trace_entry_finish(b, 200, 3);
    CHECK(sw_trace_current() == a); /* the most recent still-open request */
    char inj[4096];
    size_t l;
    uint64_t e = sw_trace_exit_start(&x, 4, inj, sizeof(inj), &l);
    sw_trace_exit_finish(e, 200, 5);
    sw_trace_entry_finish(a, 200, 6);
    CHECK(sw_trace_current() == 0);
    struct tseg *s;
    CHECK_EQ(read_all(&s), 2);
    CHECK_STR(s[0].spans[0].op, "GET:/b");
    CHECK_EQ(s[0].nspans, 1);
    CHECK_EQ(s[1].nspans, 2);
    CHECK_STR(s[1].spans[0].op, "GET:/up");
    CHECK_STR(s[1].spans[1].op, "GET:/a");
    free_segs(s, 2);
}

/*
 * sw_trace_request_now and sw_trace_exit_start_in (issue 33): the thread's request is certain
 * when a head read or a touch made it current, or when it is the only one open; with two open
 * and none touched since the current one ended, it is not known. An exit given an unknown
 * request, or one that has ended, is a root segment of its own tagged swagent.parent=unknown
 * and counted, never a child of another request; an exit given an open request is its child
 * even when another one is current.
 */
static void test_request_now(void)
{
    setup();
    struct sw_req_info qa = req_of("GET", "/a", "h", "1.1.1.1:1");
    struct sw_req_info qb = req_of("GET", "/b", "h", "1.1.1.1:2");
    struct sw_req_info qc = req_of("GET", "/c", "h", "1.1.1.1:3");
    struct sw_req_info x = req_of("GET", "/up", "u:1", "u:1");
    struct sw_trace_stats st0, st;
    sw_trace_get_stats(&st0);
    CHECK(sw_trace_request_now() == 0);
    uint64_t a = sw_trace_entry_start(&qa, 1);
    CHECK(sw_trace_request_now() == a);
    uint64_t b = sw_trace_entry_start(&qb, 2);
    uint64_t c = sw_trace_entry_start(&qc, 3);
    CHECK(sw_trace_request_now() == c);
    sw_trace_touch(a);
    CHECK(sw_trace_request_now() == a);
    sw_trace_entry_finish(a, 200, 4);
    CHECK(sw_trace_request_now() == SW_TRACE_UNKNOWN); /* b and c open, neither touched */
    CHECK(sw_trace_current() == c);                    /* sw_trace_exit_start's guess, unchanged */
    sw_trace_touch(b);
    CHECK(sw_trace_request_now() == b);
    char inj[4096];
    size_t l = 0;
    uint64_t e1 = sw_trace_exit_start_in(c, &x, 5, inj, sizeof(inj), &l); /* c's, b current */
    CHECK(e1 && l > 0);
    sw_trace_exit_finish(e1, 200, 6);
    l = 0;
    uint64_t e2 = sw_trace_exit_start_in(a, &x, 7, inj, sizeof(inj), &l); /* a has ended */
    CHECK(e2 && l > 0);
    sw_trace_exit_finish(e2, 200, 8);
    uint64_t e3 = sw_trace_exit_start_in(SW_TRACE_UNKNOWN, &x, 9, inj, sizeof(inj), &l);
    CHECK(e3);
    sw_trace_exit_finish(e3, 502, 10);
    sw_trace_get_stats(&st);
    CHECK_EQ(st.parent_unknown - st0.parent_unknown, 2);
    sw_trace_entry_finish(b, 200, 11);
    CHECK(sw_trace_request_now() == c); /* the only open one */
    sw_trace_entry_finish(c, 200, 12);
    CHECK(sw_trace_request_now() == 0);

    struct tseg *s;
    int n = read_all(&s), unknown = 0, c_seen = 0;
    CHECK_EQ(n, 5);
    for (int i = 0; i < n; i++) {
        const struct tspan *r = span_by_id(&s[i], 0);
        CHECK(r != NULL);
        if (strcmp(r->op, "GET:/up") == 0) {
            CHECK_EQ(s[i].nspans, 1);
            CHECK_EQ(r->type, SW_SPAN_EXIT);
            CHECK_EQ(r->parent, -1);
            CHECK_STR(tag(r, "swagent.parent"), "unknown");
            unknown++;
        } else if (strcmp(r->op, "GET:/c") == 0) {
            CHECK_EQ(s[i].nspans, 2);
            const struct tspan *xs = span_by_id(&s[i], 1);
            CHECK(xs != NULL && xs->type == SW_SPAN_EXIT && xs->parent == 0);
            CHECK(tag(xs, "swagent.parent") == NULL);
            c_seen++;
        } else {
            CHECK_EQ(s[i].nspans, 1); /* a and b: no exit */
        }
    }
    CHECK_EQ(unknown, 2);
    CHECK_EQ(c_seen, 1);
    free_segs(s, n);
}

static void *finish_on_other_thread(void *arg)
{
    sw_trace_entry_finish((uint64_t)(uintptr_t)arg, 200, 9);
    return NULL;
}

/*
 * sw_trace_touch (trace.h): makes a request current, inline nothing when it is current
 * already; a current request that ended on another thread (this thread's current names an
 * ended span) is skipped there too, and the current request is then the latest open one.
 */
static void test_touch_current(void)
{
    setup();
    struct sw_req_info qa = req_of("GET", "/a", "h", "1.1.1.1:1");
    struct sw_req_info qc = req_of("GET", "/c", "h", "1.1.1.1:3");
    uint64_t a = sw_trace_entry_start(&qa, 1);
    uint64_t c = sw_trace_entry_start(&qc, 2);
    CHECK(sw_trace_current() == c);
    CHECK(sw_trace_tls.current == c);
    sw_trace_touch(a);
    CHECK(sw_trace_current() == a);
    CHECK(sw_trace_tls.current == a);
    sw_trace_touch(a);
    CHECK(sw_trace_current() == a);
    sw_trace_touch(c);
    CHECK(sw_trace_current() == c);
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, finish_on_other_thread, (void *)(uintptr_t)c), 0);
    CHECK_EQ(pthread_join(th, NULL), 0);
    CHECK(sw_trace_tls.current == c); /* ended elsewhere: this thread did not see it */
    sw_trace_touch(c);                /* skipped: c is "current" */
    CHECK(sw_trace_current() == a);   /* the reader finds the latest open request */
    sw_trace_touch(c);                /* now a call: c has ended, so it is not made current */
    CHECK(sw_trace_current() == a);
    sw_trace_entry_finish(a, 200, 10);
    CHECK(sw_trace_current() == 0);
    struct tseg *s;
    CHECK_EQ(read_all(&s), 2);
    free_segs(s, 2);
}

static void test_stale_handles(void)
{
    setup();
    struct sw_req_info q = req_of("GET", "/st", "h", "1.1.1.1:1");
    uint64_t h = sw_trace_entry_start(&q, 1);
    sw_trace_entry_finish(h, 200, 2);
    sw_trace_entry_finish(h, 500, 3);          /* twice: ignored */
    sw_trace_exit_finish(h, 500, 3);           /* wrong kind, stale: ignored */
    sw_trace_entry_abort(h, "x", "y", 3);      /* ignored */
    uint64_t h2 = sw_trace_entry_start(&q, 4); /* likely the same slot, new generation */
    CHECK(h2 != h);
    sw_trace_entry_finish(h, 500, 5); /* stale: must not end h2 */
    CHECK(sw_trace_current() == h2);
    CHECK(sw_trace_set_current(h) == h2); /* a stale handle is not made current */
    CHECK(sw_trace_current() == h2);
    sw_trace_entry_finish(0xdeadbeef12345678ull, 200, 5);
    sw_trace_exit_finish(0xffffffffffffffffull, 200, 5);
    sw_trace_entry_finish(0, 200, 5);
    sw_trace_entry_finish(h2, 201, 6);
    struct tseg *s;
    CHECK_EQ(read_all(&s), 2);
    CHECK_STR(tag(&s[0].spans[0], "http.status_code"), "200");
    CHECK_STR(tag(&s[1].spans[0], "http.status_code"), "201");
    free_segs(s, 2);
}

static void test_pool_exhaustion(void)
{
    setup();
    sw_trace_test_limit_pools(4, 0);
    struct sw_req_info q = req_of("GET", "/p", "h", "1.1.1.1:1");
    uint64_t h[5];
    for (int i = 0; i < 5; i++)
        h[i] = sw_trace_entry_start(&q, 1);
    for (int i = 0; i < 4; i++)
        CHECK(h[i]);
    CHECK(h[4] == 0);
    struct sw_trace_stats st;
    sw_trace_get_stats(&st);
    CHECK_EQ(st.segments_dropped, 1);
    for (int i = 0; i < 5; i++)
        sw_trace_entry_finish(h[i], 200, 2);
    struct tseg *s;
    CHECK_EQ(read_all(&s), 4);
    free_segs(s, 4);
    /* Slots are reusable afterwards. */
    uint64_t again = sw_trace_entry_start(&q, 3);
    CHECK(again);
    sw_trace_entry_finish(again, 200, 4);

    /* Span pool: 4 span slots (the entry's span is part of its segment), so the 5th exit is
     * dropped (but propagates). */
    setup();
    sw_trace_test_limit_pools(8, 4);
    uint64_t en = sw_trace_entry_start(&q, 1);
    struct sw_req_info x = req_of("GET", "/x", "d:1", "d:1");
    uint64_t ex[5];
    char inj[4096];
    size_t l;
    for (int i = 0; i < 5; i++)
        ex[i] = sw_trace_exit_start(&x, 2, inj, sizeof(inj), &l);
    CHECK(ex[3] != 0 && ex[4] == 0);
    CHECK(l > 0);
    for (int i = 0; i < 5; i++)
        sw_trace_exit_finish(ex[i], 200, 3);
    sw_trace_entry_finish(en, 200, 4);
    sw_trace_get_stats(&st);
    CHECK_EQ(st.spans_dropped, 1);
    CHECK_EQ(read_all(&s), 1);
    CHECK_EQ(s[0].nspans, 5);
    CHECK_EQ(s[0].flags, SW_REC_SEG_SIZE_LIMITED);
    free_segs(s, 1);

    /* Arena full: a segment with very long spans is cut and flagged, still well-formed. */
    setup();
    static char longurl[1200];
    memset(longurl, 'a', sizeof(longurl) - 1);
    longurl[0] = '/';
    longurl[sizeof(longurl) - 1] = '\0';
    struct sw_req_info lx = req_of("GET", longurl, "d:1", "d:1");
    en = sw_trace_entry_start(&q, 1);
    for (int i = 0; i < 40; i++) {
        uint64_t e = sw_trace_exit_start(&lx, 2, inj, sizeof(inj), &l);
        sw_trace_exit_finish(e, 200, 3);
    }
    sw_trace_entry_finish(en, 200, 4);
    CHECK_EQ(read_all(&s), 1);
    CHECK_EQ(s[0].flags, SW_REC_SEG_SIZE_LIMITED);
    CHECK(s[0].nspans < 41);
    CHECK((int)strlen(s[0].spans[0].op) <= 150);
    free_segs(s, 1);
}

/* ---- concurrency */

#define CT_THREADS 8
#define CT_REQS 10000

static _Atomic int g_producers_left;

static void *ct_worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    char target[64];
    snprintf(target, sizeof(target), "/t%d", t);
    struct sw_req_info q = req_of("GET", target, "h", "1.1.1.1:1");
    struct sw_req_info x = req_of("POST", "/dep", "dep:1", "dep:1");
    char inj[4096];
    size_t l;
    for (int i = 0; i < CT_REQS; i++) {
        uint64_t h = sw_trace_entry_start(&q, 100 + i);
        uint64_t e = sw_trace_exit_start(&x, 101 + i, inj, sizeof(inj), &l);
        CHECK(l > 0);
        sw_trace_exit_finish(e, 200, 102 + i);
        sw_trace_entry_finish(h, 200, 103 + i);
    }
    g_producers_left--;
    return NULL;
}

struct idset {
    char **v;
    size_t cap, n;
};

static bool idset_add(struct idset *s, const char *id)
{
    uint64_t hsh = 1469598103934665603ull;
    for (const char *p = id; *p; p++)
        hsh = (hsh ^ (unsigned char)*p) * 1099511628211ull;
    size_t i = (size_t)hsh & (s->cap - 1);
    while (s->v[i]) {
        if (strcmp(s->v[i], id) == 0)
            return false;
        i = (i + 1) & (s->cap - 1);
    }
    s->v[i] = strdup(id);
    s->n++;
    return true;
}

static void test_concurrent_threads(void)
{
    setup();
    g_c.ring_bytes = 32 << 20; /* room for every segment even if this reader falls behind */
    struct sw_req_info q = req_of("GET", "/warm", "h", "1.1.1.1:1");
    uint64_t h = sw_trace_entry_start(&q, 1);
    sw_trace_entry_finish(h, 200, 2);
    char paths[2][4608];
    CHECK_EQ(ring_paths(paths, 2), 1);
    struct sw_ring *r;
    CHECK_EQ(sw_ring_open(paths[0], &r), 0);

    struct idset ids = {calloc(1u << 18, sizeof(char *)), 1u << 18, 0};
    CHECK(ids.v);
    g_producers_left = CT_THREADS;
    pthread_t th[CT_THREADS];
    for (int i = 0; i < CT_THREADS; i++)
        CHECK_EQ(pthread_create(&th[i], NULL, ct_worker, (void *)(intptr_t)i), 0);
    uint64_t cur = sw_ring_tail(r);
    long got = 0;
    struct tseg sg;
    for (;;) {
        const void *p;
        uint32_t len;
        uint16_t type;
        uint64_t next;
        int done = g_producers_left == 0;
        int rc = sw_ring_peek(r, cur, &p, &len, &type, &next);
        CHECK(rc >= 0);
        if (rc == 0) {
            if (done && sw_ring_empty(r))
                break;
            sw_ring_release(r, cur);
            usleep(200);
            continue;
        }
        cur = next;
        if (type != SW_REC_SEGMENT)
            continue;
        CHECK_EQ(parse_seg(p, len, &sg), 0);
#ifdef SW_TRACE_HAVE_ENCODE
        if ((got & 1023) == 0)
            CHECK_EQ(sw_encode_check(p, len), 0);
#endif
        got++;
        if (got > 1) {
            CHECK_EQ(sg.nspans, 2);
            CHECK_EQ(sg.spans[0].id, 1);
            CHECK_EQ(sg.spans[0].parent, 0);
            CHECK_EQ(sg.spans[1].id, 0);
            CHECK_STR(sg.spans[0].op, "POST:/dep");
            CHECK(strncmp(sg.spans[1].op, "GET:/t", 6) == 0);
        }
        CHECK(idset_add(&ids, sg.sid));
        free(sg.spans);
        if ((got & 63) == 0)
            sw_ring_release(r, cur);
    }
    sw_ring_release(r, cur);
    for (int i = 0; i < CT_THREADS; i++)
        pthread_join(th[i], NULL);
    struct sw_trace_stats st;
    sw_trace_get_stats(&st);
    CHECK_EQ(st.segments_committed + st.segments_dropped, 1 + CT_THREADS * CT_REQS);
    CHECK_EQ((uint64_t)got, st.segments_committed);
    CHECK_EQ(st.segments_dropped, 0);
    CHECK_EQ(ids.n, (size_t)got);
    sw_ring_close(r);
    for (size_t i = 0; i < ids.cap; i++)
        free(ids.v[i]);
    free(ids.v);
    printf("# concurrent: %ld segments read, %llu dropped\n", got,
           (unsigned long long)st.segments_dropped);
}

/* ---- chaos: random API calls from several threads, with handles shared between threads
 * (finished twice, finished by another thread, made current elsewhere, stale). Every record
 * must be well-formed and, once every handle is finished, the pools must be empty again. */

#define CH_THREADS 4
#define CH_OPS 20000
#define CH_SLOTS 64

static _Atomic uint64_t g_ch_handles[CH_SLOTS];

static uint64_t ch_rand(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void ch_finish(uint64_t h, uint64_t r)
{
    switch (r % 4) {
    case 0:
        sw_trace_entry_finish(h, 200 + (int)(r % 400), 5);
        break;
    case 1:
        sw_trace_entry_abort(h, "reset", "chaos", 5);
        break;
    case 2:
        sw_trace_exit_finish(h, 200 + (int)(r % 400), 5);
        break;
    default:
        sw_trace_exit_error(h, "EPIPE", "chaos", 5);
        break;
    }
}

static void *ch_worker(void *arg)
{
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)((intptr_t)arg + 1);
    struct sw_req_info q = req_of("GET", "/chaos", "h", "1.1.1.1:1");
    struct sw_req_info e = req_of("POST", "/chaos-up", "u:1", "u:1");
    char inj[4096];
    size_t l;
    for (int i = 0; i < CH_OPS; i++) {
        uint64_t r = ch_rand(&x);
        _Atomic uint64_t *slot = &g_ch_handles[(r >> 8) % CH_SLOTS];
        uint64_t h = 0;
        switch (r % 8) {
        case 0:
        case 1:
            h = sw_trace_entry_start(&q, 1);
            break;
        case 2:
        case 3:
            h = sw_trace_exit_start(&e, 2, inj, sizeof(inj), &l);
            break;
        case 4:
            sw_trace_set_current(atomic_load(slot));
            break;
        case 5:
            ch_finish(atomic_load(slot), r >> 16); /* may be finished again by its owner */
            break;
        case 6:
            sw_trace_set_current(0);
            break;
        default:
            ch_finish(r, r >> 16); /* garbage handle */
            break;
        }
        if (h)
            ch_finish(atomic_exchange(slot, h), r >> 20);
    }
    return NULL;
}

static void check_seg_shape(const struct tseg *s)
{
    CHECK(s->nspans >= 1);
    int roots = 0;
    for (int i = 0; i < s->nspans; i++) {
        const struct tspan *sp = &s->spans[i];
        for (int j = 0; j < i; j++)
            CHECK(s->spans[j].id != sp->id);
        if (sp->id == 0) {
            roots++;
            CHECK_EQ(sp->parent, -1);
        } else {
            CHECK_EQ(sp->parent, 0);
            CHECK_EQ(sp->type, SW_SPAN_EXIT);
        }
        CHECK(sp->type != SW_SPAN_ENTRY || sp->id == 0);
    }
    CHECK(roots <= 1); /* span 0 may be missing only if the arena overflowed */
    CHECK(roots == 1 || (s->flags & SW_REC_SEG_SIZE_LIMITED));
}

static void test_chaos(void)
{
    setup();
    g_c.ring_bytes = 32 << 20;
    pthread_t th[CH_THREADS];
    for (int i = 0; i < CH_THREADS; i++)
        CHECK_EQ(pthread_create(&th[i], NULL, ch_worker, (void *)(intptr_t)i), 0);
    for (int i = 0; i < CH_THREADS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < CH_SLOTS; i++) {
        uint64_t h = atomic_exchange(&g_ch_handles[i], 0);
        sw_trace_entry_finish(h, 200, 9);
        sw_trace_exit_finish(h, 200, 9);
    }
    sw_trace_set_current(0);
    char paths[1][4608];
    CHECK_EQ(ring_paths(paths, 1), 1);
    struct sw_ring *r;
    CHECK_EQ(sw_ring_open(paths[0], &r), 0);
    int n = 0;
    uint64_t cur = sw_ring_tail(r);
    const void *p;
    uint32_t len;
    uint16_t type;
    uint64_t next;
    while (sw_ring_peek(r, cur, &p, &len, &type, &next) == 1) {
        struct tseg sg; /* parsed one at a time: a parsed span is large */
        CHECK_EQ(parse_seg(p, len, &sg), 0);
#ifdef SW_TRACE_HAVE_ENCODE
        CHECK_EQ(sw_encode_check(p, len), 0);
#endif
        check_seg_shape(&sg);
        free(sg.spans);
        n++;
        cur = next;
    }
    sw_ring_release(r, cur);
    sw_ring_close(r);
    struct sw_trace_stats st;
    sw_trace_get_stats(&st);
    CHECK_EQ((uint64_t)n, st.segments_committed);
    CHECK(n > 1000);

    /* Nothing leaked: every segment slot can be claimed again. */
    struct sw_req_info q = req_of("GET", "/after", "h", "1.1.1.1:1");
    static uint64_t all[1024];
    for (int i = 0; i < 1024; i++) {
        all[i] = sw_trace_entry_start(&q, 1);
        CHECK(all[i] != 0);
    }
    CHECK(sw_trace_entry_start(&q, 1) == 0);
    for (int i = 0; i < 1024; i++)
        sw_trace_entry_finish(all[i], 200, 2);
    printf("# chaos: %d segments\n", n);
}

/* Exits of ONE segment made concurrently on several threads (handed over with set_current). */
#define SH_THREADS 4
#define SH_EXITS 16
static uint64_t g_shared_entry;

static void *sh_worker(void *arg)
{
    (void)arg;
    CHECK(sw_trace_current() == 0);
    sw_trace_set_current(g_shared_entry);
    CHECK(sw_trace_current() == g_shared_entry);
    struct sw_req_info x = req_of("GET", "/sh", "d:1", "d:1");
    char inj[4096];
    size_t l;
    for (int i = 0; i < SH_EXITS; i++) {
        uint64_t e = sw_trace_exit_start(&x, 2, inj, sizeof(inj), &l);
        CHECK(e);
        sw_trace_exit_finish(e, 200, 3);
    }
    return NULL;
}

static void test_shared_segment_threads(void)
{
    setup();
    struct sw_req_info q = req_of("GET", "/shared", "h", "1.1.1.1:1");
    g_shared_entry = sw_trace_entry_start(&q, 1);
    pthread_t th[SH_THREADS];
    for (int i = 0; i < SH_THREADS; i++)
        CHECK_EQ(pthread_create(&th[i], NULL, sh_worker, NULL), 0);
    for (int i = 0; i < SH_THREADS; i++)
        pthread_join(th[i], NULL);
    sw_trace_entry_finish(g_shared_entry, 200, 4);
    struct tseg *s;
    CHECK_EQ(read_all(&s), 1);
    CHECK_EQ(s[0].nspans, 1 + SH_THREADS * SH_EXITS);
    CHECK_EQ(s[0].flags, 0);
    bool seen[1 + SH_THREADS * SH_EXITS] = {false};
    for (int i = 0; i < s[0].nspans; i++) {
        int id = s[0].spans[i].id;
        CHECK(id >= 0 && id <= SH_THREADS * SH_EXITS);
        CHECK(!seen[id]);
        seen[id] = true;
        CHECK_EQ(s[0].spans[i].parent, id == 0 ? -1 : 0);
    }
    CHECK_EQ(s[0].spans[s[0].nspans - 1].id, 0);
    free_segs(s, 1);
}

/* A thread pool: request read on the main thread, finished and "upstream-called" on another. */
static uint64_t g_pool_entry;
static char g_pool_inj[4096];
static size_t g_pool_inj_len;

static void *pool_worker(void *arg)
{
    (void)arg;
    struct sw_req_info x = req_of("GET", "/pool-up", "u:1", "u:1");
    /* No hand-over: this thread has no current request, the call is its own root segment. */
    uint64_t e = sw_trace_exit_start(&x, 11, g_pool_inj, sizeof(g_pool_inj), &g_pool_inj_len);
    CHECK(e);
    sw_trace_exit_finish(e, 200, 12);
    sw_trace_entry_finish(g_pool_entry, 200, 13);
    return NULL;
}

static void test_thread_pool(void)
{
    setup();
    struct sw_req_info q = req_of("GET", "/pool", "h", "1.1.1.1:1");
    g_pool_entry = sw_trace_entry_start(&q, 10);
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, pool_worker, NULL), 0);
    pthread_join(th, NULL);
    CHECK(sw_trace_current() == 0); /* finished elsewhere: no longer current here */
    struct tseg *s;
    CHECK_EQ(read_all(&s), 2);
    CHECK_STR(s[0].spans[0].op, "GET:/pool-up");
    CHECK_EQ(s[0].spans[0].parent, -1);
    CHECK_STR(s[1].spans[0].op, "GET:/pool");
    CHECK(strcmp(s[0].tid, s[1].tid) != 0); /* the documented limit: two traces */
    char v[SW_SW8_MAX];
    CHECK(find_hdr(g_pool_inj, g_pool_inj_len, "sw8", v, sizeof(v)));
    free_segs(s, 2);

    /* Peer cut to plugin.peer_max_length: the span's peer and sw8 field 8 are the same bytes. */
    setup();
    g_c.peer_max_length = 6;
    CHECK_EQ(sw_trace_init(&g_c), 0); /* the request path's limits are derived at init */
    struct sw_req_info x = req_of("GET", "/p", "longhostname:8080", "longhostname:8080");
    char inj[4096];
    size_t l;
    uint64_t e = sw_trace_exit_start(&x, 1, inj, sizeof(inj), &l);
    sw_trace_exit_finish(e, 200, 2);
    CHECK_EQ(read_all(&s), 1);
    CHECK_STR(s[0].spans[0].peer, "longho");
    struct sw_sw8 d;
    CHECK(find_hdr(inj, l, "sw8", v, sizeof(v)));
    sw_sw8_decode(v, strlen(v), &d);
    CHECK_STR(d.address, "longho");
    free_segs(s, 1);
}

/*
 * agent.cluster (issue 33): exit peers are `<cluster>/<peer>`, in the span and in sw8 field 8
 * alike (the callee's ref names the caller's exit peer byte for byte); the url tag keeps the
 * address. Entry spans and the service name's composition are not touched here.
 */
static void test_cluster_peer(void)
{
    setup();
    snprintf(g_c.cluster, sizeof(g_c.cluster), "east-1");
    CHECK_EQ(sw_trace_init(&g_c), 0);
    struct sw_req_info q = req_of("GET", "/front", "front:80", "1.2.3.4:1000");
    uint64_t h = sw_trace_entry_start(&q, 10);
    char inj1[SW_SW8_MAX + 512], inj2[SW_SW8_MAX + 512], v[SW_SW8_MAX];
    size_t l1 = 0, l2 = 0;
    struct sw_req_info x1 = req_of("POST", "/x", "backend:8080", "backend:8080");
    uint64_t e1 = sw_trace_exit_start(&x1, 11, inj1, sizeof(inj1), &l1);
    struct sw_req_info x2 = req_of("GET", "/y", NULL, "10.0.0.9:9000");
    uint64_t e2 = sw_trace_exit_start(&x2, 12, inj2, sizeof(inj2), &l2);
    CHECK(h && e1 && e2);
    sw_trace_exit_finish(e1, 200, 13);
    sw_trace_exit_finish(e2, 200, 14);
    sw_trace_entry_finish(h, 200, 15);
    struct tseg *s;
    CHECK_EQ(read_all(&s), 1);
    const struct tspan *en = span_by_id(&s[0], 0), *a = span_by_id(&s[0], 1),
                       *b = span_by_id(&s[0], 2);
    CHECK_STR(en->peer, "1.2.3.4:1000"); /* an entry's peer is the client: no prefix */
    CHECK_STR(a->peer, "east-1/backend:8080");
    CHECK_STR(tag(a, "url"), "http://backend:8080/x");
    CHECK_STR(b->peer, "east-1/10.0.0.9:9000");
    CHECK_STR(tag(b, "url"), "http://10.0.0.9:9000/y");
    struct sw_sw8 d;
    CHECK(find_hdr(inj1, l1, "sw8", v, sizeof(v)));
    sw_sw8_decode(v, strlen(v), &d);
    CHECK(d.valid);
    CHECK_STR(d.address, "east-1/backend:8080");
    CHECK(find_hdr(inj2, l2, "sw8", v, sizeof(v)));
    sw_sw8_decode(v, strlen(v), &d);
    CHECK_STR(d.address, b->peer);
    free_segs(s, 1);

    /* A root exit too, and a prefix cut with the peer to plugin.peer_max_length. */
    setup();
    snprintf(g_c.cluster, sizeof(g_c.cluster), "east-1");
    g_c.peer_max_length = 10;
    CHECK_EQ(sw_trace_init(&g_c), 0);
    struct sw_req_info x = req_of("GET", "/r", "api:80", "api:80");
    char inj[4096];
    size_t l = 0;
    uint64_t e = sw_trace_exit_start(&x, 1, inj, sizeof(inj), &l);
    sw_trace_exit_finish(e, 200, 2);
    CHECK_EQ(read_all(&s), 1);
    CHECK_STR(s[0].spans[0].peer, "east-1/api");
    CHECK(find_hdr(inj, l, "sw8", v, sizeof(v)));
    sw_sw8_decode(v, strlen(v), &d);
    CHECK_STR(d.address, "east-1/api");
    free_segs(s, 1);
    g_c.cluster[0] = '\0';
}

/* An exit the connection layer never finished: its segment waits, and is completed by the
 * reaper once a pool runs out and the exit is 30 s older than its finished entry. */
static void test_reap_forgotten_exit(void)
{
    setup();
    sw_trace_test_limit_pools(1, 0);
    struct sw_req_info q = req_of("GET", "/leak", "h", "1.1.1.1:1");
    struct sw_req_info x = req_of("GET", "/lost", "d:1", "d:1");
    char inj[4096];
    size_t l;
    uint64_t h = sw_trace_entry_start(&q, 1000);
    uint64_t e = sw_trace_exit_start(&x, 1001, inj, sizeof(inj), &l);
    CHECK(e);
    sw_trace_entry_finish(h, 200, 1002);
    CHECK(sw_trace_entry_start(&q, 2000) == 0); /* pool full, the exit is too young to reap */
    struct tseg *s;
    CHECK_EQ(read_all(&s), 0);
    uint64_t h2 = sw_trace_entry_start(&q, 40000);
    CHECK(h2 != 0); /* reaped: the old segment completed and freed its slot */
    struct sw_trace_stats st;
    sw_trace_get_stats(&st);
    CHECK_EQ(st.spans_reaped, 1);
    CHECK_EQ(st.segments_dropped, 1);
    sw_trace_exit_finish(e, 200, 40001); /* the late finish of the reaped handle: ignored */
    sw_trace_entry_finish(h2, 200, 40002);
    CHECK_EQ(read_all(&s), 2);
    CHECK_EQ(s[0].nspans, 2);
    const struct tspan *lost = span_by_id(&s[0], 1);
    CHECK(lost);
    CHECK_EQ(lost->flags, SW_REC_SPAN_ERROR);
    CHECK_EQ(lost->end, 40000);
    CHECK_EQ(lost->nkv, 3);
    CHECK_STR(lost->kv[1].v, "timeout");
    CHECK_EQ(s[1].nspans, 1);
    free_segs(s, 2);
}

/* The reporter is started once when the ring is created, not again within 5 s; a ring that
 * cannot be created drops (and counts) segments, and the application goes on. */
static void test_ring_and_spawn(void)
{
    setup();
    int before = g_spawn_calls;
    struct sw_req_info q = req_of("GET", "/sp", "h", "1.1.1.1:1");
    for (int i = 0; i < 3; i++) {
        uint64_t h = sw_trace_entry_start(&q, 1);
        sw_trace_entry_finish(h, 200, 2);
    }
    CHECK_EQ(g_spawn_calls, before + 1);
    struct tseg *s;
    CHECK_EQ(read_all(&s), 3);
    free_segs(s, 3);

    setup();
    snprintf(g_c.runtime_dir, sizeof(g_c.runtime_dir), "/proc/self/no/such/dir");
    before = g_spawn_calls;
    for (int i = 0; i < 3; i++) {
        uint64_t h = sw_trace_entry_start(&q, 1);
        CHECK(h);
        sw_trace_entry_finish(h, 200, 2);
    }
    struct sw_trace_stats st;
    sw_trace_get_stats(&st);
    CHECK_EQ(st.segments_committed, 0);
    CHECK_EQ(st.segments_dropped, 3);
    CHECK_EQ(g_spawn_calls, before);
}

/* A file of `size` bytes (sparse) in the current runtime dir. */
static void plant_file(const char *name, off_t size)
{
    char p[4608];
    mkdir(g_c.runtime_dir, 0700);
    snprintf(p, sizeof(p), "%s/%s", g_c.runtime_dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    CHECK(ftruncate(fd, size) == 0);
    close(fd);
}

/* swagent.ring_total_cap: a ring that would take the user's rings past the cap is refused. */
static void test_ring_total_cap(void)
{
    struct sw_req_info q = req_of("GET", "/cap", "h", "1.1.1.1:1");
    for (int round = 0; round < 2; round++) {
        bool over = round == 0;
        setup();
        g_c.ring_bytes = 1 << 20;
        plant_file("ring-1-0000000000000000.swr", 1 << 20);          /* another process's ring */
        plant_file("other.dat", 64 << 20);                           /* not a ring: not counted */
        plant_file("ring-999999999-0000000000000000.swr", 64 << 20); /* dead owner: neither */
        g_c.ring_total_cap = over ? (3L << 20) / 2 : 3L << 20;
        for (int i = 0; i < 2; i++) {
            uint64_t h = sw_trace_entry_start(&q, 1);
            CHECK(h);
            sw_trace_entry_finish(h, 200, 2);
        }
        struct sw_trace_stats st;
        sw_trace_get_stats(&st);
        char paths[4][4608];
        if (over) {
            CHECK_EQ(st.segments_committed, 0);
            CHECK_EQ(st.segments_dropped, 2);
            CHECK_EQ(ring_paths(paths, 4), 2); /* only the planted ones */
        } else {
            CHECK_EQ(st.segments_committed, 2);
            CHECK_EQ(st.segments_dropped, 0);
            CHECK_EQ(ring_paths(paths, 4), 3);
        }
    }
}

/*
 * Admission: when the ring has no room for another segment, new traces are shed (unsampled: no
 * sw8 downstream, counted), while the segments already started, whose sw8 went downstream, are
 * all committed when they end: none is dropped at the ring. Once the ring is drained, requests
 * are traced again. (Before admission, the ring filled up and those segments were dropped.)
 */
static void test_ring_admission(void)
{
    enum { OPEN = 40 };
    setup();
    g_c.ring_bytes = 65536; /* the smallest ring */
    struct sw_req_info q = req_of("GET", "/fill", "h", "1.1.1.1:1");
    struct sw_req_info x = req_of("GET", "/down", "d:1", "d:1");
    char inj[4096];
    size_t l = 0;
    uint64_t hs[OPEN], es[OPEN];
    uint64_t h0 = sw_trace_entry_start(&q, 1); /* the first commit creates the ring */
    sw_trace_entry_finish(h0, 200, 2);
    for (int i = 0; i < OPEN; i++) {
        hs[i] = sw_trace_entry_start(&q, 10);
        es[i] = sw_trace_exit_start(&x, 11, inj, sizeof(inj), &l);
        CHECK(hs[i] && es[i]);
        CHECK(l > 5 && memcmp(inj, "sw8: ", 5) == 0);
    }
    struct sw_trace_stats st;
    int n = 0;
    for (;; n++) {
        CHECK(n < 2000); /* a 64 KiB ring holds a few hundred of these */
        if (n >= 2000)
            return;
        uint64_t h = sw_trace_entry_start(&q, 20);
        CHECK(h);
        sw_trace_entry_finish(h, 200, 21);
        sw_trace_get_stats(&st);
        if (st.segments_shed)
            break;
    }
    CHECK_EQ(st.segments_dropped, 0);
    /* While nothing is committed or consumed, the verdict stands: the open segments are not
       counted again for each shed request. */
    uint64_t counts = sw_trace_test_room_counts;
    for (int i = 0; i < 100; i++) {
        uint64_t h = sw_trace_entry_start(&q, 22);
        CHECK(h);
        sw_trace_entry_finish(h, 200, 23);
    }
    CHECK_EQ(sw_trace_test_room_counts, counts);
    sw_trace_get_stats(&st);
    CHECK_EQ(st.segments_shed, 101);
    /* A shed request is served unsampled: its exit sends no sw8. */
    uint64_t hu = sw_trace_entry_start(&q, 30);
    CHECK(hu);
    l = 0;
    uint64_t eu = sw_trace_exit_start(&x, 31, inj, sizeof(inj), &l);
    CHECK_EQ(l, 0);
    sw_trace_exit_finish(eu, 200, 32);
    sw_trace_entry_finish(hu, 200, 33);
    /* The started ones end: every one is committed, with its exit. */
    for (int i = 0; i < OPEN; i++) {
        sw_trace_exit_finish(es[i], 200, 40);
        sw_trace_entry_finish(hs[i], 200, 41);
    }
    sw_trace_get_stats(&st);
    CHECK_EQ(st.segments_dropped, 0);
    CHECK_EQ(st.segments_shed, 102);
    CHECK_EQ(st.segments_committed, (uint64_t)(1 + n + OPEN));
    char paths[4][4608];
    CHECK_EQ(ring_paths(paths, 4), 1);
    struct sw_ring *r;
    CHECK_EQ(sw_ring_open(paths[0], &r), 0);
    struct sw_ring_stats rs;
    sw_ring_get_stats(r, &rs);
    CHECK_EQ(rs.shed, 102); /* in the ring's header too, for `swagent status` and the reporter */
    CHECK_EQ(rs.dropped, 0);
    sw_ring_close(r);
    struct tseg *s;
    int got = read_all(&s); /* drains the ring */
    CHECK_EQ(got, 1 + n + OPEN);
    int two = 0;
    for (int i = 0; i < got; i++)
        two += s[i].nspans == 2;
    CHECK_EQ(two, OPEN);
    free_segs(s, got);
    /* Room again: traced again. */
    uint64_t hb = sw_trace_entry_start(&q, 50);
    l = 0;
    uint64_t eb = sw_trace_exit_start(&x, 51, inj, sizeof(inj), &l);
    CHECK(l > 5 && memcmp(inj, "sw8: ", 5) == 0);
    sw_trace_exit_finish(eb, 200, 52);
    sw_trace_entry_finish(hb, 200, 53);
    CHECK(sw_trace_test_room_counts > counts); /* the head and tail moved: counted again */
    sw_trace_get_stats(&st);
    CHECK_EQ(st.segments_shed, 102);
    CHECK_EQ(read_all(&s), 1);
    free_segs(s, 1);
}

static void test_after_fork(void)
{
    setup();
    struct sw_req_info q = req_of("GET", "/f", "h", "1.1.1.1:1");
    uint64_t open_h = sw_trace_entry_start(&q, 1);
    uint64_t h = sw_trace_entry_start(&q, 1);
    sw_trace_entry_finish(h, 200, 2);
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        sw_trace_after_fork();
        int ok = sw_trace_current() == 0;
        sw_trace_entry_finish(open_h, 200, 3); /* the parent's request: ignored here */
        uint64_t c = sw_trace_entry_start(&q, 4);
        ok = ok && c != 0;
        sw_trace_entry_finish(c, 200, 5);
        struct sw_trace_stats st;
        sw_trace_get_stats(&st);
        ok = ok && st.segments_committed == 1;
        _exit(ok ? 0 : 1);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char paths[4][4608];
    CHECK_EQ(ring_paths(paths, 4), 2); /* the child made its own ring */
    sw_trace_entry_finish(open_h, 200, 6);
    struct sw_trace_stats st;
    sw_trace_get_stats(&st);
    CHECK_EQ(st.segments_committed, 2);
}

/* Exec context (CGI): the value handed to an exec'ed child, and the child's side. */
static void test_exec_context(void)
{
    setup();
    char v[SW_SW8_MAX], v2[SW_SW8_MAX];
    struct sw_sw8 d;
    CHECK_EQ(sw_trace_exec_context(v, sizeof(v), "/x/run.sh"), 0); /* nothing being served */
    struct sw_req_info q = req_of("GET", "/cgi?a=1", "h", "1.2.3.4:5");
    uint64_t e = sw_trace_entry_start(&q, 10);
    size_t n = sw_trace_exec_context(v, sizeof(v) - 1, "/x/run.sh");
    CHECK(n > 0);
    v[n] = 0;
    sw_trace_entry_finish(e, 200, 20);
    struct tseg *s;
    CHECK_EQ(read_all(&s), 1);
    sw_sw8_decode(v, n, &d);
    CHECK(d.valid);
    CHECK_STR(d.trace_id, s[0].tid);
    CHECK_STR(d.parent_segment_id, s[0].sid);
    /* The exec while serving recorded an EXEC exit span of duration 0: the child's parent. */
    CHECK_EQ(d.parent_span_id, 1);
    CHECK_EQ(s[0].nspans, 2);
    const struct tspan *xe = span_by_id(&s[0], 1);
    CHECK(xe != NULL);
    CHECK_EQ(xe->type, SW_SPAN_EXIT);
    CHECK_EQ(xe->layer, SW_LAYER_UNKNOWN);
    CHECK_EQ(xe->parent, 0);
    CHECK_STR(xe->op, "EXEC:run.sh");
    CHECK_STR(xe->peer, "exec:run.sh");
    CHECK_EQ(xe->end, xe->start);
    CHECK_STR(d.parent_service, "svc-a");
    CHECK_STR(d.parent_endpoint, "GET:/cgi");
    CHECK_STR(d.address, "exec:run.sh");
    char parent_seg[T_STR], parent_tid[T_STR];
    snprintf(parent_seg, sizeof(parent_seg), "%s", s[0].sid);
    snprintf(parent_tid, sizeof(parent_tid), "%s", s[0].tid);
    free_segs(s, 1);

    /* Forked while serving: the child's exec gets the request it was forked in. */
    e = sw_trace_entry_start(&q, 30);
    sw_trace_after_fork();
    size_t n2 = sw_trace_exec_context(v2, sizeof(v2), "cgi");
    CHECK(n2 > 0);
    sw_sw8_decode(v2, n2, &d);
    CHECK(d.valid && d.parent_span_id == 0);
    CHECK_STR(d.address, "exec:cgi");

    /* The exec'ed child: a root exit becomes EXEC:<exe> entry (ref to the parent) + exit. */
    setup();
    sw_trace_set_exec_parent(v, n);
    char inj[SW_SW8_MAX + 64], hv[SW_SW8_MAX];
    size_t l = 0;
    struct sw_req_info x = req_of("GET", "/out", "b:81", "10.0.0.1:81");
    uint64_t h = sw_trace_exit_start(&x, 40, inj, sizeof(inj), &l);
    CHECK(h);
    CHECK(sw_trace_current() == 0);
    sw_trace_exit_finish(h, 200, 45);
    CHECK_EQ(read_all(&s), 1);
    CHECK_EQ(s[0].nspans, 2);
    const struct tspan *en = span_by_id(&s[0], 0), *ex = span_by_id(&s[0], 1);
    CHECK(en && ex);
    CHECK_EQ(en->type, SW_SPAN_ENTRY);
    CHECK_EQ(en->layer, SW_LAYER_UNKNOWN);
    CHECK_EQ(en->parent, -1);
    CHECK_STR(en->op, "EXEC:test_trace");
    CHECK_EQ(en->nrefs, 1);
    CHECK_STR(en->ref_psid, parent_seg);
    CHECK_EQ(en->ref_pspan, 1);
    CHECK_STR(en->ref_addr, "exec:run.sh");
    CHECK_EQ(en->start, 40);
    CHECK_EQ(en->end, 45);
    CHECK_EQ(ex->type, SW_SPAN_EXIT);
    CHECK_EQ(ex->parent, 0);
    CHECK_STR(ex->op, "GET:/out");
    CHECK_STR(s[0].tid, parent_tid);
    CHECK(find_hdr(inj, l, "sw8", hv, sizeof(hv)));
    sw_sw8_decode(hv, strlen(hv), &d);
    CHECK(d.valid && d.parent_span_id == 1);
    CHECK_STR(d.parent_segment_id, s[0].sid);
    CHECK_STR(d.parent_endpoint, "EXEC:test_trace");
    free_segs(s, 1);
    /* Passed on unchanged to the child's own execs (a shell script's commands). */
    n2 = sw_trace_exec_context(v2, sizeof(v2), "curl");
    CHECK_EQ(n2, n);
    CHECK(memcmp(v2, v, n) == 0);
    sw_trace_set_exec_parent(NULL, 0);
}

/*
 * Fork + exec while serving (CGI): the parent's segment gets an Exit span EXEC:<program>,
 * opened at the fork, named by the child's exec, ended with the entry; the child's context
 * names that span and its peer. A forked child that never execs leaves no exit span.
 */
static void test_fork_exec_exit(void)
{
    for (int round = 0; round < 2; round++) {
        bool execs = round == 0;
        setup();
        struct sw_req_info q = req_of("GET", "/cgi-bin/x.sh", "h", "1.2.3.4:5");
        uint64_t e = sw_trace_entry_start(&q, sw_trace_now_ms());
        CHECK(e);
        int fds[2];
        CHECK(pipe(fds) == 0);
        sw_trace_before_fork();
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            sw_trace_after_fork();
            char v[SW_SW8_MAX];
            size_t n = execs ? sw_trace_exec_context(v, sizeof(v), "/srv/cgi-bin/x.sh") : 0;
            ssize_t w = write(fds[1], v, n);
            _exit(w == (ssize_t)n ? 0 : 1);
        }
        sw_trace_after_fork_parent();
        close(fds[1]);
        char v[SW_SW8_MAX];
        ssize_t n = read(fds[0], v, sizeof(v));
        close(fds[0]);
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        int64_t end = sw_trace_now_ms() + 5;
        sw_trace_entry_finish(e, 200, end);
        struct tseg *s;
        CHECK_EQ(read_all(&s), 1);
        if (!execs) {
            CHECK_EQ(n, 0);
            CHECK_EQ(s[0].nspans, 1);
            free_segs(s, 1);
            continue;
        }
        CHECK(n > 0);
        struct sw_sw8 d;
        sw_sw8_decode(v, (size_t)n, &d);
        CHECK(d.valid);
        CHECK_EQ(s[0].nspans, 2);
        const struct tspan *x = span_by_id(&s[0], 1);
        CHECK(x != NULL);
        CHECK_EQ(x->type, SW_SPAN_EXIT);
        CHECK_EQ(x->layer, SW_LAYER_UNKNOWN);
        CHECK_EQ(x->parent, 0);
        CHECK_STR(x->op, "EXEC:x.sh");
        CHECK_STR(x->peer, "exec:x.sh");
        CHECK_EQ(x->end, end);
        CHECK(x->start <= x->end);
        CHECK_EQ(d.parent_span_id, 1);
        CHECK_STR(d.address, x->peer);
        CHECK_STR(d.parent_segment_id, s[0].sid);
        CHECK_STR(tag(span_by_id(&s[0], 0), "http.status_code"), "200");
        free_segs(s, 1);
    }
}

/* plugin.tomcat / plugin.httpclient .collect_http_params: the query string as http.params. */
static void test_http_params(void)
{
    setup();
    struct sw_req_info q = req_of("GET", "/p?a=1&b=2#frag", "h:1", "1.1.1.1:1");
    uint64_t h = sw_trace_entry_start(&q, 1); /* both flags off by default: no tag */
    sw_trace_entry_finish(h, 200, 2);
    struct tseg *s;
    CHECK_EQ(read_all(&s), 1);
    CHECK(tag(&s[0].spans[0], "http.params") == NULL);
    CHECK_STR(s[0].spans[0].op, "GET:/p");
    free_segs(s, 1);

    setup();
    g_c.collect_http_params_entry = true;
    CHECK_EQ(sw_trace_init(&g_c), 0);
    h = sw_trace_entry_start(&q, 1);
    struct sw_req_info x = req_of("GET", "/out?z=9", "b:2", "10.0.0.1:2");
    char inj[SW_SW8_MAX + 64];
    size_t l = 0;
    uint64_t xh = sw_trace_exit_start(&x, 1, inj, sizeof(inj), &l);
    sw_trace_exit_finish(xh, 200, 2);
    sw_trace_entry_finish(h, 200, 2);
    CHECK_EQ(read_all(&s), 1);
    CHECK_STR(tag(span_by_id(&s[0], 0), "http.params"), "a=1&b=2");
    CHECK(tag(span_by_id(&s[0], 1), "http.params") == NULL); /* exit flag off */
    free_segs(s, 1);

    /* Exit only, cut to plugin.http.http_params_length_threshold. */
    setup();
    g_c.collect_http_params_exit = true;
    g_c.http_params_length_threshold = 3;
    CHECK_EQ(sw_trace_init(&g_c), 0);
    xh = sw_trace_exit_start(&q, 1, inj, sizeof(inj), &l);
    sw_trace_exit_finish(xh, 200, 2);
    CHECK_EQ(read_all(&s), 1);
    CHECK_STR(tag(&s[0].spans[0], "http.params"), "a=1");
    CHECK_STR(tag(&s[0].spans[0], "url"), "http://h:1/p?a=1&b=2#frag");
    free_segs(s, 1);
}

/* correlation.auto_tag_keys: listed keys of the incoming sw8-correlation tag the entry span. */
static void test_correlation_auto_tags(void)
{
    char corr[256], b[64];
    size_t at = 0;
    const char *kv[] = {"a", "1", "b", "two", "c", ""};
    for (int i = 0; i < 6; i++) {
        long n = sw_b64_encode(kv[i], strlen(kv[i]), b, sizeof(b));
        CHECK(n >= 0);
        memcpy(corr + at, b, (size_t)n);
        at += (size_t)n;
        corr[at++] = i % 2 ? ',' : ':';
    }
    at--; /* the last ',' */
    for (int round = 0; round < 2; round++) {
        setup();
        g_c.correlation_element_max_number = 3;
        if (round == 1) {
            g_c.correlation_auto_tag_keys.n = 2;
            snprintf(g_c.correlation_auto_tag_keys.item[0], SW_CFG_ITEM_MAX, "b");
            snprintf(g_c.correlation_auto_tag_keys.item[1], SW_CFG_ITEM_MAX, "zz");
        }
        struct sw_req_info q = req_of("GET", "/c", "h", "1.1.1.1:1");
        q.correlation = corr;
        q.correlation_len = at;
        uint64_t h = sw_trace_entry_start(&q, 1);
        sw_trace_entry_finish(h, 200, 2);
        struct tseg *s;
        CHECK_EQ(read_all(&s), 1);
        const struct tspan *e = &s[0].spans[0];
        CHECK(tag(e, "a") == NULL);
        CHECK(tag(e, "c") == NULL);
        if (round == 0)
            CHECK(tag(e, "b") == NULL);
        else
            CHECK_STR(tag(e, "b"), "two");
        CHECK_STR(tag(e, "http.status_code"), "200");
        free_segs(s, 1);
    }
}

static void test_operation_name(void)
{
    setup();
    g_c.operation_name_threshold = 10;
    CHECK_EQ(sw_trace_init(&g_c), 0);
    struct sw_req_info q = req_of("GET", "http://h:1/abcdefghijkl?x#y", NULL, "1.1.1.1:1");
    uint64_t h = sw_trace_entry_start(&q, 1);
    sw_trace_entry_finish(h, 200, 2);
    struct tseg *s;
    CHECK_EQ(read_all(&s), 1);
    CHECK_STR(s[0].spans[0].op, "GET:/abcde");
    CHECK_STR(tag(&s[0].spans[0], "url"), "http://h:1/abcdefghijkl?x#y");
    free_segs(s, 1);

    /* No method, no target (a connect that failed): op "/", url from the peer, no method tag. */
    setup();
    struct sw_req_info c = req_of("", "", NULL, "10.0.0.1:80");
    char inj[16];
    size_t l = 5;
    uint64_t e = sw_trace_exit_start(&c, 1, inj, 0, &l);
    CHECK(e);
    CHECK_EQ(l, 0);
    sw_trace_exit_error(e, "ECONNREFUSED", "connect failed", 1);
    CHECK_EQ(read_all(&s), 1);
    CHECK_STR(s[0].spans[0].op, "/");
    CHECK_EQ(s[0].spans[0].ntags, 1);
    CHECK_STR(tag(&s[0].spans[0], "url"), "http://10.0.0.1:80");
    CHECK_EQ(s[0].spans[0].flags, SW_REC_SPAN_ERROR);
    free_segs(s, 1);
}

#ifdef SW_TRACE_HAVE_ENCODE
/* A record of an entry with a ref and an exit, through the reporter's encoder to protobuf. */
static void test_encode_roundtrip(void)
{
    setup();
    char sw8[SW_SW8_MAX];
    size_t n = sw_sw8_encode(sw8, sizeof(sw8), "T.7", "S.7", 2, "up", "upi", "GET:/u", "me:1");
    struct sw_req_info q = req_of("GET", "/enc?q", "me:1", "9.9.9.9:9");
    q.sw8 = sw8;
    q.sw8_len = n;
    uint64_t h = sw_trace_entry_start(&q, 100);
    struct sw_req_info x = req_of("PUT", "/d", "d:2", "d:2");
    char inj[4096];
    size_t l;
    uint64_t e = sw_trace_exit_start(&x, 101, inj, sizeof(inj), &l);
    sw_trace_exit_error(e, "EPIPE", "broken pipe", 102);
    sw_trace_entry_finish(h, 404, 103);

    char paths[1][4608];
    CHECK_EQ(ring_paths(paths, 1), 1);
    struct sw_ring *r;
    CHECK_EQ(sw_ring_open(paths[0], &r), 0);
    const void *p;
    uint32_t len;
    uint16_t type;
    uint64_t next;
    CHECK_EQ(sw_ring_peek(r, sw_ring_tail(r), &p, &len, &type, &next), 1);
    uint8_t *out;
    size_t out_len;
    CHECK_EQ(sw_encode_segment(p, len, sw_ring_get_meta(r), &out, &out_len), 0);
    Skywalking__V3__SegmentObject *o = skywalking__v3__segment_object__unpack(NULL, out_len, out);
    CHECK(o);
    CHECK_STR(o->traceid, "T.7");
    CHECK_STR(o->service, "svc-a");
    CHECK_STR(o->serviceinstance, "inst-a");
    CHECK_EQ(o->n_spans, 2);
    const Skywalking__V3__SpanObject *ex = o->spans[0], *en = o->spans[1];
    CHECK_EQ(ex->spanid, 1);
    CHECK_EQ(ex->parentspanid, 0);
    CHECK_EQ(ex->iserror, 1);
    CHECK_EQ(ex->n_logs, 1);
    CHECK_STR(ex->peer, "d:2");
    CHECK_EQ(en->spanid, 0);
    CHECK_EQ(en->parentspanid, -1);
    CHECK_EQ(en->iserror, 1);
    CHECK_EQ(en->componentid, 49);
    CHECK_EQ(en->n_refs, 1);
    CHECK_STR(en->refs[0]->networkaddressusedatpeer, "me:1");
    CHECK_STR(en->refs[0]->parenttracesegmentid, "S.7");
    CHECK_EQ(en->refs[0]->parentspanid, 2);
    skywalking__v3__segment_object__free_unpacked(o, NULL);
    free(out);
    sw_ring_close(r);
}
#endif

/* Removes the temporary directory, also when a CHECK fails (exit runs atexit handlers). */
static void cleanup(void)
{
    sw_trace_after_fork(); /* detach the last ring */
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_root);
}

/* Database and cache exits (sw_trace_db_start_in): layer, component, names, tags, errors, both
 * inside a request and as root exits. */
static void test_db_exits(void)
{
    setup();
    struct sw_req_info q = req_of("GET", "/page", "front:80", "1.2.3.4:1000");
    uint64_t h = sw_trace_entry_start(&q, 100);
    CHECK(h);
    const struct sw_tag rt[] = {{"cache.type", 10, "Redis", 5},
                                {"cache.cmd", 9, "GET", 3},
                                {"cache.key", 9, "user:1", 6},
                                {"cache.op", 8, "read", 4}};
    struct sw_db_info r = {.layer = SW_TRACE_LAYER_CACHE,
                           .component = SW_TRACE_COMPONENT_REDIS,
                           .op = "Redis/",
                           .op_len = 6,
                           .peer = "127.0.0.1:6379",
                           .peer_len = 14,
                           .tags = rt,
                           .ntags = 4,
                           .op_name = "GET",
                           .op_name_len = 3};
    uint64_t e1 = sw_trace_db_start_in(sw_trace_request_now(), &r, 101);
    CHECK(e1);
    sw_trace_db_finish(e1, NULL, NULL, 102);
    static char stmt[3000];
    memset(stmt, 'x', sizeof(stmt) - 1);
    const struct sw_tag pt[] = {{"db.type", 7, "PostgreSQL", 10},
                                {"db.instance", 11, "shop", 4},
                                {"db.statement", 12, stmt, 1500}};
    struct sw_db_info pg = {.layer = SW_TRACE_LAYER_DATABASE,
                            .component = SW_TRACE_COMPONENT_POSTGRESQL,
                            .op = "PostgreSQL/Query",
                            .op_len = 16,
                            .peer = "db:5432",
                            .peer_len = 7,
                            .tags = pt,
                            .ntags = 3};
    uint64_t e2 = sw_trace_db_start_in(sw_trace_request_now(), &pg, 103);
    CHECK(e2);
    sw_trace_db_finish(e2, "PostgreSQLError", "42P01: relation \"x\" does not exist", 104);
    sw_trace_entry_finish(h, 200, 105);

    struct tseg *s;
    CHECK_EQ(read_all(&s), 1);
    CHECK_EQ(s[0].nspans, 3);
    const struct tspan *a = span_by_id(&s[0], 1), *b = span_by_id(&s[0], 2);
    CHECK_EQ(a->parent, 0);
    CHECK_EQ(a->type, SW_SPAN_EXIT);
    CHECK_EQ(a->layer, 5);
    CHECK_EQ(a->comp, 7);
    CHECK_STR(a->op, "Redis/GET");
    CHECK_STR(a->peer, "127.0.0.1:6379");
    CHECK_EQ(a->ntags, 4);
    CHECK_STR(tag(a, "cache.type"), "Redis");
    CHECK_STR(tag(a, "cache.cmd"), "GET");
    CHECK_STR(tag(a, "cache.key"), "user:1");
    CHECK_STR(tag(a, "cache.op"), "read");
    CHECK_EQ(a->flags, 0);
    CHECK_EQ(a->start, 101);
    CHECK_EQ(a->end, 102);
    CHECK_EQ(b->layer, 1);
    CHECK_EQ(b->comp, 22);
    CHECK_STR(b->op, "PostgreSQL/Query");
    CHECK_STR(b->peer, "db:5432");
    CHECK_STR(tag(b, "db.type"), "PostgreSQL");
    CHECK_STR(tag(b, "db.instance"), "shop");
    CHECK_EQ(strlen(tag(b, "db.statement")), 1500);
    CHECK_EQ(b->flags, SW_REC_SPAN_ERROR);
    CHECK_EQ(b->nlogs, 1);
    const struct tspan *root = span_by_id(&s[0], 0);
    CHECK_EQ(root->comp, 49); /* the HTTP spans keep theirs */
    CHECK_EQ(root->layer, SW_LAYER_HTTP);
    free_segs(s, 1);

    /* No request: a root exit segment of its own. */
    setup();
    uint64_t e3 = sw_trace_db_start_in(0, &r, 200);
    CHECK(e3);
    sw_trace_db_finish(e3, "RedisError", "ERR wrong type", 201);
    CHECK_EQ(read_all(&s), 1);
    CHECK_EQ(s[0].nspans, 1);
    CHECK_EQ(s[0].spans[0].id, 0);
    CHECK_EQ(s[0].spans[0].parent, -1);
    CHECK_EQ(s[0].spans[0].comp, 7);
    CHECK_EQ(s[0].spans[0].layer, 5);
    CHECK_EQ(s[0].spans[0].flags, SW_REC_SPAN_ERROR);
    CHECK_STR(tag(&s[0].spans[0], "cache.key"), "user:1");
    free_segs(s, 1);

    /* An HTTP exit after a database exit in the same slot keeps component 49 and no tags. */
    setup();
    uint64_t e4 = sw_trace_db_start_in(0, &r, 300);
    sw_trace_db_finish(e4, NULL, NULL, 301);
    char inj[SW_SW8_MAX + 64];
    size_t l = 0;
    struct sw_req_info x = req_of("GET", "/r", "h:81", "10.9.9.9:81");
    uint64_t e5 = sw_trace_exit_start(&x, 302, inj, sizeof(inj), &l);
    sw_trace_exit_finish(e5, 200, 303);
    CHECK_EQ(read_all(&s), 2);
    /* the database exit's prebuilt record (db_image) */
    CHECK_EQ(s[0].nspans, 1);
    CHECK_EQ(s[0].spans[0].id, 0);
    CHECK_EQ(s[0].spans[0].parent, -1);
    CHECK_EQ(s[0].spans[0].type, SW_SPAN_EXIT);
    CHECK_EQ(s[0].spans[0].comp, 7);
    CHECK_EQ(s[0].spans[0].layer, 5);
    CHECK_EQ(s[0].spans[0].flags, 0);
    CHECK_EQ(s[0].spans[0].start, 300);
    CHECK_EQ(s[0].spans[0].end, 301);
    CHECK_STR(s[0].spans[0].op, "Redis/GET");
    CHECK_STR(s[0].spans[0].peer, "127.0.0.1:6379");
    CHECK_EQ(s[0].spans[0].ntags, 4);
    CHECK_STR(tag(&s[0].spans[0], "cache.type"), "Redis");
    CHECK_STR(tag(&s[0].spans[0], "cache.op"), "read");
    CHECK_EQ(s[0].spans[0].nlogs, 0);
    CHECK_EQ(s[1].spans[0].comp, 49);
    CHECK(tag(&s[1].spans[0], "cache.key") == NULL);
    free_segs(s, 2);

    /* A value cut by its caller gets "..." (dots), as SkyWalking's SqlBodyUtil does. */
    setup();
    pg.dots = 1u << 2;
    uint64_t e6 = sw_trace_db_start_in(0, &pg, 400);
    sw_trace_db_finish(e6, NULL, NULL, 401);
    CHECK_EQ(read_all(&s), 1);
    const char *st = tag(&s[0].spans[0], "db.statement");
    CHECK(st != NULL);
    CHECK_EQ(strlen(st), 1503);
    CHECK(strcmp(st + 1500, "...") == 0);
    CHECK_STR(tag(&s[0].spans[0], "db.instance"), "shop");
    free_segs(s, 1);
}

int main(void)
{
    char tmpl[] = "/tmp/swagent-test-trace-XXXXXX";
    CHECK(mkdtemp(tmpl));
    snprintf(g_root, sizeof(g_root), "%s", tmpl);
    atexit(cleanup);
    RUN_TEST(test_entry_without_sw8);
    RUN_TEST(test_entry_with_sw8);
    RUN_TEST(test_exits_in_entry);
    RUN_TEST(test_root_exit);
    RUN_TEST(test_errors);
    RUN_TEST(test_span_limit);
    RUN_TEST(test_arena_keeps_root);
    RUN_TEST(test_ignore_suffix);
    RUN_TEST(test_ignore_suffix_usual);
    RUN_TEST(test_sampling);
    RUN_TEST(test_keep);
    RUN_TEST(test_entry_waits_for_open_exit);
    RUN_TEST(test_event_loop_current);
    RUN_TEST(test_touch_current);
    RUN_TEST(test_request_now);
    RUN_TEST(test_stale_handles);
    RUN_TEST(test_pool_exhaustion);
    RUN_TEST(test_operation_name);
    RUN_TEST(test_shared_segment_threads);
    RUN_TEST(test_thread_pool);
    RUN_TEST(test_reap_forgotten_exit);
    RUN_TEST(test_ring_and_spawn);
    RUN_TEST(test_ring_total_cap);
    RUN_TEST(test_ring_admission);
    RUN_TEST(test_after_fork);
    RUN_TEST(test_exec_context);
    RUN_TEST(test_fork_exec_exit);
    RUN_TEST(test_http_params);
    RUN_TEST(test_cluster_peer);
    RUN_TEST(test_correlation_auto_tags);
    RUN_TEST(test_db_exits);
#ifdef SW_TRACE_HAVE_ENCODE
    RUN_TEST(test_encode_roundtrip);
#endif
    RUN_TEST(test_concurrent_threads);
    RUN_TEST(test_chaos);
    return 0;
}
