/*
 * logs.c - SW_REC_LOG records to LogData on LogReportService/collect (logs.h).
 */
#include "common.h"

#include "config.h"
#include "lineasm.h"
#include "log.h"
#include "logs.h"
#include "record.h"
#include "transport.h"

#include "logging/Logging.pb-c.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define M_COLLECT "/skywalking.v3.LogReportService/collect"

/* One traced process's output: two assemblers (stdout, stderr) and who it is. */
struct stream {
    struct stream *next;
    uint64_t ring_id;
    uint64_t last_cursor; /* the last record taken (records handed out again are skipped) */
    char service[SW_RING_NAME_MAX];
    char instance[SW_RING_NAME_MAX];
    struct sw_lineasm fd[2];
    uint64_t last_ms[2]; /* the reporter's clock when bytes last came */
    bool seen;
};

struct sw_rlog {
    size_t max_line;
    struct stream *streams;
    struct sw_msg *queue;
    size_t nqueue, capqueue, qbytes;
    struct stream *cur; /* the stream being emitted for (emit_cb) */
    int cur_fd;
    uint64_t now_ms;
    struct sw_rlog_stats st;
};

struct sw_rlog *sw_rlog_new(const struct sw_config *c)
{
    struct sw_rlog *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->max_line = c && c->log_max_line > 0 ? (size_t)c->log_max_line : 16384;
    return l;
}

static void stream_free(struct stream *s)
{
    sw_lineasm_free(&s->fd[0]);
    sw_lineasm_free(&s->fd[1]);
    free(s);
}

void sw_rlog_free(struct sw_rlog *l)
{
    if (!l)
        return;
    while (l->streams) {
        struct stream *s = l->streams;
        l->streams = s->next;
        stream_free(s);
    }
    for (size_t i = 0; i < l->nqueue; i++)
        free((void *)l->queue[i].data);
    free(l->queue);
    free(l);
}

/* ---- lines to LogData ---- */

static void enqueue(struct sw_rlog *l, uint8_t *b, size_t n)
{
    while (l->nqueue > 0 && l->qbytes + n > SW_RLOG_QUEUE_BYTES) { /* the oldest go */
        l->qbytes -= l->queue[0].len;
        free((void *)l->queue[0].data);
        memmove(l->queue, l->queue + 1, (l->nqueue - 1) * sizeof(l->queue[0]));
        l->nqueue--;
        l->st.dropped++;
    }
    if (l->nqueue == l->capqueue) {
        size_t c = l->capqueue ? 2 * l->capqueue : 256;
        struct sw_msg *q = realloc(l->queue, c * sizeof(*q));
        if (!q) {
            free(b);
            l->st.dropped++;
            return;
        }
        l->queue = q;
        l->capqueue = c;
    }
    l->queue[l->nqueue++] = (struct sw_msg){b, n, false};
    l->qbytes += n;
}

static void emit_cb(void *arg, const struct sw_line *line)
{
    struct sw_rlog *l = arg;
    struct stream *s = l->cur;
    Skywalking__V3__LogData d = SKYWALKING__V3__LOG_DATA__INIT;
    Skywalking__V3__LogDataBody body = SKYWALKING__V3__LOG_DATA_BODY__INIT;
    Skywalking__V3__TextLog text = SKYWALKING__V3__TEXT_LOG__INIT;
    Skywalking__V3__TraceContext tc = SKYWALKING__V3__TRACE_CONTEXT__INIT;
    Skywalking__V3__LogTags tags = SKYWALKING__V3__LOG_TAGS__INIT;
    Skywalking__V3__KeyStringValuePair kv[2] = {SKYWALKING__V3__KEY_STRING_VALUE_PAIR__INIT,
                                                SKYWALKING__V3__KEY_STRING_VALUE_PAIR__INIT};
    Skywalking__V3__KeyStringValuePair *kvp[2] = {&kv[0], &kv[1]};

    d.timestamp = line->time_ms;
    d.service = s->service;
    d.serviceinstance = s->instance;
    text.text = (char *)line->text;
    body.type = "text";
    body.content_case = SKYWALKING__V3__LOG_DATA_BODY__CONTENT_TEXT;
    body.text = &text;
    d.body = &body;
    if (line->ctx->has) {
        tc.traceid = (char *)line->ctx->trace_id;
        tc.tracesegmentid = (char *)line->ctx->segment_id;
        tc.spanid = line->ctx->span_id;
        d.tracecontext = &tc;
    }
    kv[0].key = "stream";
    kv[0].value = l->cur_fd == 1 ? "stdout" : "stderr";
    size_t nkv = 1;
    if (line->cut) {
        kv[1].key = "swagent.cut";
        kv[1].value = "true";
        nkv = 2;
    }
    tags.n_data = nkv;
    tags.data = kvp;
    d.tags = &tags;
    size_t n = skywalking__v3__log_data__get_packed_size(&d);
    uint8_t *b = malloc(n ? n : 1);
    if (!b) {
        l->st.dropped++;
        return;
    }
    skywalking__v3__log_data__pack(&d, b);
    l->st.lines++;
    if (line->cut)
        l->st.cut++;
    enqueue(l, b, n);
}

static struct stream *stream_of(struct sw_rlog *l, uint64_t ring_id,
                                const struct sw_ring_meta *meta)
{
    for (struct stream *s = l->streams; s; s = s->next)
        if (s->ring_id == ring_id)
            return s;
    struct stream *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    if (sw_lineasm_init(&s->fd[0], l->max_line) != 0 ||
        sw_lineasm_init(&s->fd[1], l->max_line) != 0) {
        stream_free(s);
        return NULL;
    }
    s->ring_id = ring_id;
    snprintf(s->service, sizeof(s->service), "%s", meta->service);
    snprintf(s->instance, sizeof(s->instance), "%s", meta->instance);
    s->next = l->streams;
    l->streams = s;
    return s;
}

void sw_rlog_record(struct sw_rlog *l, uint64_t ring_id, uint64_t cursor,
                    const struct sw_ring_meta *meta, const void *payload, uint32_t len)
{
    if (!l)
        return;
    struct stream *s = stream_of(l, ring_id, meta);
    if (!s)
        return;
    if (s->last_cursor && cursor <= s->last_cursor)
        return; /* handed out again after a failed batch: taken already */
    s->last_cursor = cursor;
    l->st.records++;
    int fd;
    int64_t ms;
    bool gap;
    struct sw_lineasm_ctx ctx;
    const uint8_t *text;
    uint32_t tl;
    if (sw_logrec_parse(payload, len, &fd, &ms, &gap, &ctx, &text, &tl) != 0) {
        l->st.bad++;
        SW_LOG_DEBUG_("reporter: a log record of %u bytes does not parse (skipped)", len);
        return;
    }
    l->cur = s;
    l->cur_fd = fd;
    s->last_ms[fd - 1] = l->now_ms;
    sw_lineasm_push(&s->fd[fd - 1], text, tl, ms, ctx.has ? &ctx : NULL, gap, emit_cb, l);
}

static void flush_stream(struct sw_rlog *l, struct stream *s, int which)
{
    l->cur = s;
    l->cur_fd = which + 1;
    sw_lineasm_flush(&s->fd[which], emit_cb, l);
}

static int send_queue(struct sw_rlog *l, struct sw_transport *t)
{
    while (l->nqueue > 0) {
        size_t n = l->nqueue < SW_RLOG_SEND_MAX ? l->nqueue : SW_RLOG_SEND_MAX;
        int rc = sw_transport_call(t, M_COLLECT, l->queue, n, NULL, NULL);
        if (rc != 0) {
            l->st.failed++;
            return rc;
        }
        for (size_t i = 0; i < n; i++) {
            l->qbytes -= l->queue[i].len;
            free((void *)l->queue[i].data);
        }
        memmove(l->queue, l->queue + n, (l->nqueue - n) * sizeof(l->queue[0]));
        l->nqueue -= n;
        l->st.sent += n;
    }
    return 0;
}

void sw_rlog_tick(struct sw_rlog *l, struct sw_transport *t, const struct sw_drain_info *info,
                  int ninfo, uint64_t now_ms)
{
    if (!l)
        return;
    l->now_ms = now_ms;
    for (struct stream **pp = &l->streams; *pp;) {
        struct stream *s = *pp;
        const struct sw_drain_info *e = NULL;
        for (int i = 0; i < ninfo; i++)
            if (info[i].ring_id == s->ring_id)
                e = &info[i];
        bool ended = !e || (!e->alive && e->used == 0);
        for (int k = 0; k < 2; k++) {
            if (s->last_ms[k] == 0) /* bytes came before the first tick: count from now */
                s->last_ms[k] = now_ms;
            if (sw_lineasm_pending(&s->fd[k]) &&
                (ended || now_ms - s->last_ms[k] >= SW_RLOG_QUIET_MS))
                flush_stream(l, s, k);
        }
        if (!e) { /* the ring is gone: nothing more comes */
            *pp = s->next;
            stream_free(s);
            continue;
        }
        pp = &s->next;
    }
    if (l->nqueue > 0 && t)
        send_queue(l, t);
}

bool sw_rlog_pending(const struct sw_rlog *l)
{
    if (!l)
        return false;
    if (l->nqueue > 0)
        return true;
    for (const struct stream *s = l->streams; s; s = s->next)
        if (sw_lineasm_pending(&s->fd[0]) || sw_lineasm_pending(&s->fd[1]))
            return true;
    return false;
}

void sw_rlog_get_stats(const struct sw_rlog *l, struct sw_rlog_stats *out)
{
    if (l)
        *out = l->st;
    else
        memset(out, 0, sizeof(*out));
}
