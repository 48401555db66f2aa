/*
 * tree.c - `collector-stub tree FILE`: the SkyWalking UI's trace view, in the terminal.
 *
 * Input: the stub's segments file, one SegmentObject per line in the proto3 JSON mapping
 * (int64 fields may be JSON strings or numbers, enums names or numbers, default-valued fields
 * may be absent). Output: one tree per trace id. Spans nest under their in-segment parent; a
 * segment's span that carries refs nests under the referenced (parentTraceSegmentId,
 * parentSpanId) span of another segment of the same trace. A ref whose parent was not received
 * is kept under a "(parent segment <id> not received)" marker, never dropped.
 *
 * Rules:
 * - Offline tool code (not the agent): stdio and malloc are fine; every allocation failure
 *   ends the run with -ENOMEM instead of printing a partial, misleading tree.
 * - Input is untrusted: fields may be missing or of the wrong type, parents may form cycles,
 *   chains may be deep. Control bytes are escaped before they reach the terminal.
 * - Output is deterministic: traces by first start time then trace id; siblings by start time,
 *   then span id, then input order.
 */
#include "common.h"

#include "tree.h"

#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TREE_MAX_DEPTH 64   /* deeper lines keep this indentation and show their depth */
#define TREE_MAX_FIELD 256  /* longer strings are shortened on screen */
#define TREE_MAX_ERRORS 100 /* per-line messages after this are only counted */

struct tree_ref {
    char *parent_seg; /* parentTraceSegmentId */
    int parent_span;  /* parentSpanId */
};

struct tree_log {
    int64_t time; /* epoch ms */
    char *text;   /* "k=v, k=v" */
};

struct tree_span {
    struct tree_seg *seg; /* owning segment */
    int id;               /* spanId */
    int parent;           /* parentSpanId */
    int64_t start, end;   /* epoch ms */
    char *op, *peer, *type, *status;
    bool error;
    struct tree_ref *refs;
    size_t nrefs;
    struct tree_log *logs;
    size_t nlogs;
    struct tree_span **kids; /* children, sorted before rendering */
    size_t nkids, capkids;
    size_t order;          /* input order, the last tie-breaker */
    bool attached;         /* has a parent (span or orphan marker) */
    bool claimed;          /* reached by the layout walk */
    struct tree_span *via; /* the parent it is drawn under (NULL at a root) */
    size_t nown;           /* kids drawn under this span */
};

struct tree_seg {
    char *trace_id, *seg_id, *service;
    struct tree_span *spans;
    size_t nspans;
    struct tree_span **by_id; /* spans sorted by id, built per trace before linking */
};

/* A marker for spans whose referenced parent was not received. */
struct tree_orphan {
    char *parent_seg; /* missing segment id */
    int parent_span;  /* the missing span's id (when the segment arrived) */
    bool seg_missing; /* the whole parent segment was not received */
    struct tree_span **kids;
    size_t nkids, capkids;
    int64_t start; /* earliest kid start, for ordering */
};

/* One line of the trace's first level: a root span or an orphan marker. */
struct tree_top {
    int64_t start;
    int id;
    size_t order;
    struct tree_span *span;     /* either this */
    struct tree_orphan *orphan; /* or this */
};

struct tree_state {
    struct tree_seg *segs;
    size_t nsegs, capsegs;
    size_t next_order;
    FILE *out;
    const char *branch, *last, *pipe, *blank; /* connectors */
};

static char *dupstr(const char *s)
{
    return strdup(s ? s : "");
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 8;
    while (ncap < need)
        ncap *= 2;
    void *p = realloc(*arr, ncap * elem);
    if (!p)
        return -ENOMEM;
    *arr = p;
    *cap = ncap;
    return 0;
}

/* Returns the string value of `key`, or NULL when absent or not a string. */
static const char *get_str(struct json_object *o, const char *key)
{
    struct json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
        return NULL;
    return json_object_get_string(v);
}

/* int64 in the proto3 JSON mapping: a JSON string of digits, or a number. */
static int get_i64(struct json_object *o, const char *key, int64_t def, int64_t *out)
{
    struct json_object *v;
    *out = def;
    if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
        return 0;
    if (json_object_is_type(v, json_type_int)) {
        *out = json_object_get_int64(v);
        return 0;
    }
    if (json_object_is_type(v, json_type_string)) {
        const char *s = json_object_get_string(v);
        char *end;
        errno = 0;
        long long n = strtoll(s, &end, 10);
        if (errno || end == s || *end)
            return -EINVAL;
        *out = n;
        return 0;
    }
    return -EINVAL;
}

static bool get_bool(struct json_object *o, const char *key)
{
    struct json_object *v;
    if (!json_object_object_get_ex(o, key, &v))
        return false;
    if (json_object_is_type(v, json_type_string))
        return strcmp(json_object_get_string(v), "true") == 0;
    return json_object_get_boolean(v);
}

/* Enum in the proto3 JSON mapping: its name, or its number. */
static char *get_enum(struct json_object *o, const char *key, const char *const *names,
                      size_t nnames)
{
    struct json_object *v;
    if (!json_object_object_get_ex(o, key, &v))
        return dupstr(names[0]);
    if (json_object_is_type(v, json_type_string))
        return dupstr(json_object_get_string(v));
    if (json_object_is_type(v, json_type_int)) {
        int64_t n = json_object_get_int64(v);
        if (n >= 0 && (uint64_t)n < nnames)
            return dupstr(names[n]);
        char buf[32];
        snprintf(buf, sizeof(buf), "%" PRId64, n);
        return dupstr(buf);
    }
    return dupstr("?");
}

/* Returns the value of tag `key` in a tags array, or NULL. */
static const char *find_tag(struct json_object *tags, const char *key)
{
    size_t n = json_object_array_length(tags);
    for (size_t i = 0; i < n; i++) {
        struct json_object *t = json_object_array_get_idx(tags, i);
        const char *k = json_object_is_type(t, json_type_object) ? get_str(t, "key") : NULL;
        if (k && strcmp(k, key) == 0)
            return get_str(t, "value");
    }
    return NULL;
}

static void free_span(struct tree_span *sp)
{
    free(sp->op);
    free(sp->peer);
    free(sp->type);
    free(sp->status);
    for (size_t i = 0; i < sp->nrefs; i++)
        free(sp->refs[i].parent_seg);
    free(sp->refs);
    for (size_t i = 0; i < sp->nlogs; i++)
        free(sp->logs[i].text);
    free(sp->logs);
    free(sp->kids);
}

static void free_seg(struct tree_seg *sg)
{
    free(sg->trace_id);
    free(sg->seg_id);
    free(sg->service);
    for (size_t i = 0; i < sg->nspans; i++)
        free_span(&sg->spans[i]);
    free(sg->spans);
    free(sg->by_id);
}

/* Joins a log's data pairs into "k=v, k=v". Returns NULL on allocation failure. */
static char *log_text(struct json_object *data)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    size_t n =
        data && json_object_is_type(data, json_type_array) ? json_object_array_length(data) : 0;
    for (size_t i = 0; i < n; i++) {
        struct json_object *kv = json_object_array_get_idx(data, i);
        if (!json_object_is_type(kv, json_type_object))
            continue;
        const char *k = get_str(kv, "key"), *v = get_str(kv, "value");
        fprintf(f, "%s%s=%s", i ? ", " : "", k ? k : "", v ? v : "");
    }
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* Fills `sp` from a span object. Returns 0, -EINVAL (malformed) or -ENOMEM. */
static int parse_span(struct json_object *o, struct tree_span *sp, const char **why)
{
    static const char *const types[] = {"Entry", "Exit", "Local"};
    int64_t v;
    struct json_object *arr;

    if (!json_object_is_type(o, json_type_object)) {
        *why = "span is not an object";
        return -EINVAL;
    }
    if (get_i64(o, "spanId", 0, &v) || v < INT32_MIN || v > INT32_MAX) {
        *why = "bad spanId";
        return -EINVAL;
    }
    sp->id = (int)v;
    if (get_i64(o, "parentSpanId", 0, &v) || v < INT32_MIN || v > INT32_MAX) {
        *why = "bad parentSpanId";
        return -EINVAL;
    }
    sp->parent = (int)v;
    if (get_i64(o, "startTime", 0, &sp->start) || get_i64(o, "endTime", 0, &sp->end)) {
        *why = "bad startTime/endTime";
        return -EINVAL;
    }
    sp->error = get_bool(o, "isError");
    sp->op = dupstr(get_str(o, "operationName"));
    sp->peer = dupstr(get_str(o, "peer"));
    sp->type = get_enum(o, "spanType", types, SW_ARRAY_LEN(types));
    if (!sp->op || !sp->peer || !sp->type)
        return -ENOMEM;

    if (json_object_object_get_ex(o, "tags", &arr) && json_object_is_type(arr, json_type_array)) {
        const char *st = find_tag(arr, "http.status_code");
        if (!st)
            st = find_tag(arr, "status_code");
        if (!st)
            st = find_tag(arr, "rpc.status_code");
        if (st && !(sp->status = dupstr(st)))
            return -ENOMEM;
    }

    if (json_object_object_get_ex(o, "refs", &arr) && json_object_is_type(arr, json_type_array)) {
        size_t n = json_object_array_length(arr);
        sp->refs = calloc(n ? n : 1, sizeof(*sp->refs));
        if (!sp->refs)
            return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
            struct json_object *r = json_object_array_get_idx(arr, i);
            if (!json_object_is_type(r, json_type_object))
                continue;
            const char *ps = get_str(r, "parentTraceSegmentId");
            if (!ps || !*ps || get_i64(r, "parentSpanId", 0, &v) || v < INT32_MIN || v > INT32_MAX)
                continue; /* a ref we cannot follow is no parent */
            struct tree_ref *ref = &sp->refs[sp->nrefs];
            if (!(ref->parent_seg = dupstr(ps)))
                return -ENOMEM;
            ref->parent_span = (int)v;
            sp->nrefs++;
        }
    }

    if (json_object_object_get_ex(o, "logs", &arr) && json_object_is_type(arr, json_type_array)) {
        size_t n = json_object_array_length(arr);
        sp->logs = calloc(n ? n : 1, sizeof(*sp->logs));
        if (!sp->logs)
            return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
            struct json_object *l = json_object_array_get_idx(arr, i), *data = NULL;
            if (!json_object_is_type(l, json_type_object))
                continue;
            struct tree_log *lg = &sp->logs[sp->nlogs];
            get_i64(l, "time", 0, &lg->time);
            json_object_object_get_ex(l, "data", &data);
            if (!(lg->text = log_text(data)))
                return -ENOMEM;
            sp->nlogs++;
        }
    }
    return 0;
}

/* Parses one segment object into `sg`. Returns 0, -EINVAL (with *why) or -ENOMEM. */
static int parse_segment(struct json_object *o, struct tree_seg *sg, size_t *order,
                         const char **why)
{
    struct json_object *spans;
    if (!json_object_is_type(o, json_type_object)) {
        *why = "not a JSON object";
        return -EINVAL;
    }
    const char *tid = get_str(o, "traceId"), *sid = get_str(o, "traceSegmentId");
    if (!tid || !*tid) {
        *why = "missing traceId";
        return -EINVAL;
    }
    if (!sid || !*sid) {
        *why = "missing traceSegmentId";
        return -EINVAL;
    }
    sg->trace_id = dupstr(tid);
    sg->seg_id = dupstr(sid);
    sg->service = dupstr(get_str(o, "service"));
    if (!sg->trace_id || !sg->seg_id || !sg->service)
        return -ENOMEM;
    if (!json_object_object_get_ex(o, "spans", &spans) ||
        json_object_is_type(spans, json_type_null))
        return 0;
    if (!json_object_is_type(spans, json_type_array)) {
        *why = "spans is not an array";
        return -EINVAL;
    }
    size_t n = json_object_array_length(spans);
    sg->spans = calloc(n ? n : 1, sizeof(*sg->spans));
    if (!sg->spans)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        struct tree_span *sp = &sg->spans[i];
        sg->nspans = i + 1;
        sp->order = (*order)++;
        int rc = parse_span(json_object_array_get_idx(spans, i), sp, why);
        if (rc)
            return rc;
    }
    return 0;
}

/* Writes `s` with control bytes escaped and long strings shortened. */
static void put_field(FILE *out, const char *s)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++, n++) {
        if (n == TREE_MAX_FIELD) {
            fputs("...", out);
            return;
        }
        if (*p < 0x20 || *p == 0x7f)
            fprintf(out, "\\x%02x", *p);
        else
            fputc(*p, out);
    }
}

static int cmp_span(const struct tree_span *a, const struct tree_span *b)
{
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    if (a->id != b->id)
        return a->id < b->id ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

static int cmp_span_ptr(const void *a, const void *b)
{
    return cmp_span(*(struct tree_span *const *)a, *(struct tree_span *const *)b);
}

static int cmp_top(const void *pa, const void *pb)
{
    const struct tree_top *a = pa, *b = pb;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    if (!a->orphan != !b->orphan)
        return a->orphan ? 1 : -1; /* received roots before markers */
    if (a->orphan && b->orphan) {
        int c = strcmp(a->orphan->parent_seg, b->orphan->parent_seg);
        if (c)
            return c;
        return (a->orphan->parent_span > b->orphan->parent_span) -
               (a->orphan->parent_span < b->orphan->parent_span);
    }
    if (a->id != b->id)
        return a->id < b->id ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

/* Segments sort by trace id, then input order, so a trace's segments are contiguous. */
static int cmp_seg_ptr(const void *pa, const void *pb)
{
    const struct tree_seg *a = *(struct tree_seg *const *)pa, *b = *(struct tree_seg *const *)pb;
    int c = strcmp(a->trace_id, b->trace_id);
    if (c)
        return c;
    return a < b ? -1 : a > b;
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_kid(struct tree_span ***kids, size_t *nkids, size_t *cap, struct tree_span *sp)
{
    if (grow((void **)kids, cap, *nkids + 1, sizeof(**kids)))
        return -ENOMEM;
    (*kids)[(*nkids)++] = sp;
    sp->attached = true;
    return 0;
}

static int cmp_span_id(const void *pa, const void *pb)
{
    const struct tree_span *a = *(struct tree_span *const *)pa;
    const struct tree_span *b = *(struct tree_span *const *)pb;
    if (a->id != b->id)
        return a->id < b->id ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

static int cmp_seg_id(const void *pa, const void *pb)
{
    const struct tree_seg *a = *(struct tree_seg *const *)pa, *b = *(struct tree_seg *const *)pb;
    int c = strcmp(a->seg_id, b->seg_id);
    if (c)
        return c;
    return a < b ? -1 : a > b;
}

/* Builds the segment's span index by id (first in input order wins on duplicates). */
static int index_spans(struct tree_seg *sg)
{
    sg->by_id = calloc(sg->nspans ? sg->nspans : 1, sizeof(*sg->by_id));
    if (!sg->by_id)
        return -ENOMEM;
    for (size_t i = 0; i < sg->nspans; i++)
        sg->by_id[i] = &sg->spans[i];
    if (sg->nspans > 1)
        qsort(sg->by_id, sg->nspans, sizeof(*sg->by_id), cmp_span_id);
    return 0;
}

static struct tree_span *find_span(struct tree_seg *sg, int id)
{
    size_t lo = 0, hi = sg->nspans;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sg->by_id[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < sg->nspans && sg->by_id[lo]->id == id ? sg->by_id[lo] : NULL;
}

/* Finds a segment by id in `byid` (sorted by cmp_seg_id; the first received wins). */
static struct tree_seg *find_seg(struct tree_seg **byid, size_t n, const char *id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(byid[mid]->seg_id, id) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && strcmp(byid[lo]->seg_id, id) == 0 ? byid[lo] : NULL;
}

/* Prints one span line: service, operation, type, peer, offset and duration, status, error. */
static void print_span_line(struct tree_state *st, const struct tree_span *sp, int64_t t0)
{
    FILE *out = st->out;
    put_field(out, sp->seg->service[0] ? sp->seg->service : "(no service)");
    fputs("  ", out);
    put_field(out, sp->op[0] ? sp->op : "(no operation)");
    fputs("  ", out);
    put_field(out, sp->type);
    if (sp->peer[0]) {
        fputs("  peer=", out);
        put_field(out, sp->peer);
    }
    fprintf(out, "  %" PRId64 " ms (+%" PRId64 ")", sp->end - sp->start, sp->start - t0);
    if (sp->status) {
        fputs("  status=", out);
        put_field(out, sp->status);
    }
    if (sp->error)
        fputs("  [ERROR]", out);
    fputc('\n', out);
}

/* The connectors printed before a line, one per ancestor level. */
struct tree_prefix {
    const char **parts;
    size_t depth, cap;
};

static int prefix_push(struct tree_prefix *pf, const char *part)
{
    if (grow((void **)&pf->parts, &pf->cap, pf->depth + 1, sizeof(*pf->parts)))
        return -ENOMEM;
    pf->parts[pf->depth++] = part;
    return 0;
}

/* Prints the prefix; past TREE_MAX_DEPTH the indentation stops growing and the depth shows. */
static void put_prefix(struct tree_state *st, const struct tree_prefix *pf)
{
    size_t n = pf->depth < TREE_MAX_DEPTH ? pf->depth : TREE_MAX_DEPTH;
    for (size_t i = 0; i < n; i++)
        fputs(pf->parts[i], st->out);
    if (pf->depth > TREE_MAX_DEPTH)
        fprintf(st->out, "[depth %zu] ", pf->depth);
}

/*
 * Marks everything reachable from `root` as drawn under it (iterative, so deep chains cannot
 * exhaust the stack). Every span has at most one parent, so a span is claimed once; a kid that
 * is already claimed closes a cycle and is not drawn again.
 */
static int claim(struct tree_span *root, struct tree_span ***stack, size_t *cap)
{
    size_t n = 0;
    if (root->claimed)
        return 0;
    root->claimed = true;
    root->via = NULL;
    if (grow((void **)stack, cap, 1, sizeof(**stack)))
        return -ENOMEM;
    (*stack)[n++] = root;
    while (n) {
        struct tree_span *sp = (*stack)[--n];
        for (size_t i = 0; i < sp->nkids; i++) {
            struct tree_span *k = sp->kids[i];
            if (k->claimed)
                continue;
            k->claimed = true;
            k->via = sp;
            sp->nown++;
            if (grow((void **)stack, cap, n + 1, sizeof(**stack)))
                return -ENOMEM;
            (*stack)[n++] = k;
        }
    }
    return 0;
}

/* Prints one span with its logs and pushes its continuation connector. */
static int emit_span(struct tree_state *st, struct tree_span *sp, struct tree_prefix *pf, bool last,
                     int64_t t0)
{
    put_prefix(st, pf);
    fputs(last ? st->last : st->branch, st->out);
    print_span_line(st, sp, t0);
    if (prefix_push(pf, last ? st->blank : st->pipe))
        return -ENOMEM;
    for (size_t i = 0; i < sp->nlogs; i++) {
        put_prefix(st, pf);
        fputs(sp->nown ? st->pipe : st->blank, st->out);
        fprintf(st->out, "log +%" PRId64 " ms: ", sp->logs[i].time - t0);
        put_field(st->out, sp->logs[i].text);
        fputc('\n', st->out);
    }
    return 0;
}

/* Draws the subtree claimed under `root`, depth first, without recursion. */
static int render_tree(struct tree_state *st, struct tree_span *root, struct tree_prefix *pf,
                       bool last, int64_t t0)
{
    struct frame {
        struct tree_span *sp;
        size_t next, left; /* next kid index; kids still to draw */
    } *stack = NULL;
    size_t n = 0, cap = 0, base = pf->depth;
    int rc = -ENOMEM;

    if (emit_span(st, root, pf, last, t0) || grow((void **)&stack, &cap, 1, sizeof(*stack)))
        goto out;
    stack[n++] = (struct frame){root, 0, root->nown};
    while (n) {
        struct frame *f = &stack[n - 1];
        if (!f->left) {
            n--;
            pf->depth--;
            continue;
        }
        struct tree_span *k = f->sp->kids[f->next++];
        if (k->via != f->sp)
            continue;
        f->left--;
        if (emit_span(st, k, pf, f->left == 0, t0) ||
            grow((void **)&stack, &cap, n + 1, sizeof(*stack)))
            goto out;
        stack[n++] = (struct frame){k, 0, k->nown};
    }
    rc = 0;
out:
    pf->depth = base;
    free(stack);
    return rc;
}

/* Renders one trace: segs[0..n) share a trace id. Returns 0 or -ENOMEM. */
static int render_trace(struct tree_state *st, struct tree_seg **segs, size_t n)
{
    struct tree_orphan *orphans = NULL;
    size_t norphans = 0, caporphans = 0;
    struct tree_top *tops = NULL;
    size_t ntops = 0, captops = 0;
    char **services = NULL;
    struct tree_prefix pf = {0};
    struct tree_span **stack = NULL, **cyclic = NULL;
    struct tree_seg **byid = NULL;
    size_t capstack = 0, ncyclic = 0, capcyclic = 0;
    int rc = -ENOMEM;
    int64_t t0 = INT64_MAX, t1 = INT64_MIN;
    size_t nspans = 0;

    /* Indexes: segments by id, each segment's spans by id. */
    byid = calloc(n, sizeof(*byid));
    if (!byid)
        goto out;
    for (size_t s = 0; s < n; s++) {
        byid[s] = segs[s];
        if (index_spans(segs[s]))
            goto out;
    }
    qsort(byid, n, sizeof(*byid), cmp_seg_id);

    /* Link every span to its parent: in-segment parent first, then the first followable ref. */
    for (size_t s = 0; s < n; s++) {
        struct tree_seg *sg = segs[s];
        for (size_t i = 0; i < sg->nspans; i++) {
            struct tree_span *sp = &sg->spans[i], *parent = NULL;
            nspans++;
            t0 = sp->start < t0 ? sp->start : t0;
            t1 = sp->end > t1 ? sp->end : t1;
            if (sp->parent >= 0 && sp->parent != sp->id)
                parent = find_span(sg, sp->parent);
            if (parent) {
                if (add_kid(&parent->kids, &parent->nkids, &parent->capkids, sp))
                    goto out;
                continue;
            }
            if (!sp->nrefs)
                continue;
            struct tree_seg *psg = NULL;
            size_t r;
            for (r = 0; r < sp->nrefs && !parent; r++) {
                psg = find_seg(byid, n, sp->refs[r].parent_seg);
                if (psg)
                    parent = find_span(psg, sp->refs[r].parent_span);
            }
            if (parent && parent != sp) {
                if (add_kid(&parent->kids, &parent->nkids, &parent->capkids, sp))
                    goto out;
                continue;
            }
            /* Orphan: keyed by the first ref; the span id counts only if the segment arrived. */
            psg = find_seg(byid, n, sp->refs[0].parent_seg);
            int pspan = psg ? sp->refs[0].parent_span : -1;
            struct tree_orphan *og = NULL;
            for (size_t k = 0; k < norphans && !og; k++)
                if (orphans[k].seg_missing == !psg && orphans[k].parent_span == pspan &&
                    strcmp(orphans[k].parent_seg, sp->refs[0].parent_seg) == 0)
                    og = &orphans[k];
            if (!og) {
                if (grow((void **)&orphans, &caporphans, norphans + 1, sizeof(*orphans)))
                    goto out;
                og = &orphans[norphans++];
                memset(og, 0, sizeof(*og));
                og->parent_seg = sp->refs[0].parent_seg;
                og->parent_span = pspan;
                og->seg_missing = !psg;
                og->start = INT64_MAX;
            }
            if (add_kid(&og->kids, &og->nkids, &og->capkids, sp))
                goto out;
            og->start = sp->start < og->start ? sp->start : og->start;
        }
    }
    if (!nspans)
        t0 = t1 = 0;

    /* First level: roots and orphan markers, then everything sorted. */
    for (size_t s = 0; s < n; s++) {
        for (size_t i = 0; i < segs[s]->nspans; i++) {
            struct tree_span *sp = &segs[s]->spans[i];
            if (sp->nkids > 1)
                qsort(sp->kids, sp->nkids, sizeof(*sp->kids), cmp_span_ptr);
            if (sp->attached)
                continue;
            if (grow((void **)&tops, &captops, ntops + 1, sizeof(*tops)))
                goto out;
            tops[ntops++] = (struct tree_top){sp->start, sp->id, sp->order, sp, NULL};
        }
    }
    for (size_t k = 0; k < norphans; k++) {
        qsort(orphans[k].kids, orphans[k].nkids, sizeof(*orphans[k].kids), cmp_span_ptr);
        if (grow((void **)&tops, &captops, ntops + 1, sizeof(*tops)))
            goto out;
        tops[ntops++] = (struct tree_top){orphans[k].start, 0, 0, NULL, &orphans[k]};
    }
    if (ntops > 1)
        qsort(tops, ntops, sizeof(*tops), cmp_top);

    /* Header: trace id, duration, segments, distinct services. */
    services = calloc(n, sizeof(*services));
    if (!services)
        goto out;
    size_t nsvc = 0;
    for (size_t s = 0; s < n; s++)
        services[nsvc++] = segs[s]->service;
    qsort(services, nsvc, sizeof(*services), cmp_str_ptr);
    size_t uniq = 0;
    for (size_t i = 0; i < nsvc; i++)
        if (i == 0 || strcmp(services[i], services[uniq - 1]) != 0)
            services[uniq++] = services[i];
    fputs("Trace ", st->out);
    put_field(st->out, segs[0]->trace_id);
    fprintf(st->out, "  %" PRId64 " ms  %zu segment%s  %zu span%s  %zu service%s:", t1 - t0, n,
            n == 1 ? "" : "s", nspans, nspans == 1 ? "" : "s", uniq, uniq == 1 ? "" : "s");
    for (size_t i = 0; i < uniq; i++) {
        fputs(i ? ", " : " ", st->out);
        put_field(st->out, services[i][0] ? services[i] : "(no service)");
    }
    fputc('\n', st->out);

    /* Layout: claim from the first level; whatever stays unclaimed sits in a parent cycle. */
    for (size_t t = 0; t < ntops; t++) {
        if (tops[t].span && claim(tops[t].span, &stack, &capstack))
            goto out;
        for (size_t i = 0; tops[t].orphan && i < tops[t].orphan->nkids; i++)
            if (claim(tops[t].orphan->kids[i], &stack, &capstack))
                goto out;
    }
    for (size_t s = 0; s < n; s++) {
        for (size_t i = 0; i < segs[s]->nspans; i++) {
            struct tree_span *sp = &segs[s]->spans[i];
            if (sp->claimed)
                continue;
            if (grow((void **)&cyclic, &capcyclic, ncyclic + 1, sizeof(*cyclic)) ||
                claim(sp, &stack, &capstack))
                goto out;
            cyclic[ncyclic++] = sp;
        }
    }

    /* Body: roots and orphan markers, then the cycles under one marker. */
    for (size_t t = 0; t < ntops; t++) {
        bool last = t + 1 == ntops && !ncyclic;
        if (tops[t].span) {
            if (render_tree(st, tops[t].span, &pf, last, t0))
                goto out;
            continue;
        }
        struct tree_orphan *og = tops[t].orphan;
        fputs(last ? st->last : st->branch, st->out);
        fputs(og->seg_missing ? "(parent segment " : "(parent span ", st->out);
        put_field(st->out, og->parent_seg);
        if (!og->seg_missing)
            fprintf(st->out, " #%d", og->parent_span);
        fputs(" not received)\n", st->out);
        if (prefix_push(&pf, last ? st->blank : st->pipe))
            goto out;
        for (size_t i = 0; i < og->nkids; i++)
            if (render_tree(st, og->kids[i], &pf, i + 1 == og->nkids, t0))
                goto out;
        pf.depth--;
    }
    if (ncyclic) {
        fprintf(st->out, "%s(spans whose parents form a cycle)\n", st->last);
        if (prefix_push(&pf, st->blank))
            goto out;
        for (size_t i = 0; i < ncyclic; i++)
            if (render_tree(st, cyclic[i], &pf, i + 1 == ncyclic, t0))
                goto out;
        pf.depth--;
    }
    fputc('\n', st->out);
    rc = 0;
out:
    for (size_t k = 0; k < norphans; k++)
        free(orphans[k].kids);
    free(orphans);
    free(tops);
    free(services);
    free(pf.parts);
    free(stack);
    free(cyclic);
    free(byid);
    return rc;
}

/* Orders trace groups by their first span start, then trace id. */
struct tree_group {
    size_t first, count;
    int64_t start;
};

static int cmp_group(const void *pa, const void *pb, void *arg)
{
    const struct tree_group *a = pa, *b = pb;
    struct tree_seg **segs = arg;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    return strcmp(segs[a->first]->trace_id, segs[b->first]->trace_id);
}

/* Strips a trailing newline and reports whether the line holds only whitespace. */
static bool blank_line(char *line, ssize_t *len)
{
    while (*len > 0 && (line[*len - 1] == '\n' || line[*len - 1] == '\r'))
        line[--*len] = '\0';
    for (ssize_t i = 0; i < *len; i++)
        if (line[i] != ' ' && line[i] != '\t')
            return false;
    return true;
}

static int read_segments(struct tree_state *st, FILE *in, FILE *err)
{
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0, bad = 0;
    ssize_t len;
    int rc = 0;
    struct json_tokener *tok = json_tokener_new();
    if (!tok)
        return -ENOMEM;

    while ((len = getline(&line, &cap, in)) >= 0) {
        lineno++;
        if (blank_line(line, &len))
            continue;
        const char *why = NULL;
        char msg[128];
        json_tokener_reset(tok);
        struct json_object *o = json_tokener_parse_ex(tok, line, (int)len);
        enum json_tokener_error jerr = json_tokener_get_error(tok);
        if (!o) {
            snprintf(msg, sizeof(msg), "invalid JSON: %s",
                     jerr == json_tokener_continue ? "truncated" : json_tokener_error_desc(jerr));
            why = msg;
        } else {
            size_t used = json_tokener_get_parse_end(tok);
            for (size_t i = used; i < (size_t)len && !why; i++)
                if (line[i] != ' ' && line[i] != '\t')
                    why = "trailing characters after the JSON value";
        }
        if (!why) {
            if (grow((void **)&st->segs, &st->capsegs, st->nsegs + 1, sizeof(*st->segs))) {
                json_object_put(o);
                rc = -ENOMEM;
                break;
            }
            struct tree_seg *sg = &st->segs[st->nsegs];
            memset(sg, 0, sizeof(*sg));
            rc = parse_segment(o, sg, &st->next_order, &why);
            if (rc == 0) {
                st->nsegs++;
            } else {
                free_seg(sg);
                if (rc == -ENOMEM) {
                    json_object_put(o);
                    break;
                }
                rc = 0;
            }
        }
        json_object_put(o);
        if (why && ++bad <= TREE_MAX_ERRORS)
            fprintf(err, "tree: line %ld: malformed segment: %s (skipped)\n", lineno, why);
    }
    if (rc == 0 && ferror(in))
        rc = -EIO;
    if (bad > TREE_MAX_ERRORS)
        fprintf(err, "tree: %ld malformed lines in total\n", bad);
    free(line);
    json_tokener_free(tok);
    return rc;
}

long sw_stub_tree_render(FILE *in, FILE *out, FILE *err, unsigned flags)
{
    struct tree_state st = {.out = out};
    struct tree_seg **order = NULL;
    struct tree_group *groups = NULL;
    size_t ngroups = 0;
    long rc;

    if (flags & SW_TREE_ASCII) {
        st.branch = "|- ";
        st.last = "`- ";
        st.pipe = "|  ";
        st.blank = "   ";
    } else {
        st.branch = "\u251c\u2500 ";
        st.last = "\u2514\u2500 ";
        st.pipe = "\u2502  ";
        st.blank = "   ";
    }
    rc = read_segments(&st, in, err);
    if (rc < 0)
        goto out;
    rc = -ENOMEM;
    order = calloc(st.nsegs ? st.nsegs : 1, sizeof(*order));
    groups = calloc(st.nsegs ? st.nsegs : 1, sizeof(*groups));
    if (!order || !groups)
        goto out;
    for (size_t i = 0; i < st.nsegs; i++) {
        for (size_t k = 0; k < st.segs[i].nspans; k++)
            st.segs[i].spans[k].seg = &st.segs[i];
        order[i] = &st.segs[i];
    }
    if (st.nsegs)
        qsort(order, st.nsegs, sizeof(*order), cmp_seg_ptr);
    for (size_t i = 0; i < st.nsegs; i++) {
        if (i == 0 || strcmp(order[i]->trace_id, order[i - 1]->trace_id) != 0)
            groups[ngroups++] = (struct tree_group){i, 0, INT64_MAX};
        struct tree_group *g = &groups[ngroups - 1];
        g->count++;
        for (size_t k = 0; k < order[i]->nspans; k++)
            if (order[i]->spans[k].start < g->start)
                g->start = order[i]->spans[k].start;
    }
    if (ngroups > 1)
        qsort_r(groups, ngroups, sizeof(*groups), cmp_group, order);
    for (size_t g = 0; g < ngroups; g++)
        if (render_trace(&st, &order[groups[g].first], groups[g].count))
            goto out;
    rc = (long)st.nsegs;
out:
    fflush(out);
    for (size_t i = 0; i < st.nsegs; i++)
        free_seg(&st.segs[i]);
    free(st.segs);
    free(order);
    free(groups);
    return rc;
}

static int usage(void)
{
    fputs("usage: collector-stub tree [--ascii] FILE|-\n"
          "  Renders the traces of a segments JSON-lines file as trees (one per trace id).\n"
          "  --ascii  use ASCII connectors instead of box-drawing characters\n",
          stderr);
    return 2;
}

int sw_stub_tree_main(int argc, char **argv)
{
    unsigned flags = 0;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--ascii") == 0)
            flags |= SW_TREE_ASCII;
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return usage();
        else if (!path && (argv[i][0] != '-' || strcmp(argv[i], "-") == 0))
            path = argv[i];
        else
            return usage();
    }
    if (!path)
        return usage();

    FILE *in = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!in) {
        fprintf(stderr, "tree: cannot open %s: %s\n", path, strerror(errno));
        return 1;
    }
    long n = sw_stub_tree_render(in, stdout, stderr, flags);
    if (in != stdin)
        fclose(in);
    if (n < 0) {
        fprintf(stderr, "tree: %s\n", strerror((int)-n));
        return 1;
    }
    if (n == 0) {
        fprintf(stderr, "tree: no segment parsed from %s\n", path);
        return 1;
    }
    return 0;
}
