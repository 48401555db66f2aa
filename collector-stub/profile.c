/*
 * profile.c - collector-stub's ProfileTask service (tasks from --profile-task, snapshots and
 * task ends written as JSON lines) and the `profile` view, which builds the profile trees of
 * those snapshots as OAP's ProfileAnalyzer does (see profile.h).
 *
 * Rules: input from clients is parsed with protobuf-c and refused when it does not parse; the
 * view reads the stub's own JSON lines with json-c and skips lines it cannot read (counted).
 */
#include "common.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/Command.pb-c.h"
#include "profile.h"
#include "profile/Profile.pb-c.h"

#define MAX_TASKS 8
#define MAX_ARGS 16

struct stub_task {
    char *service; /* NULL: any service */
    int64_t create_ms;
    size_t nargs;
    char *keys[MAX_ARGS], *values[MAX_ARGS];
};

static struct stub_task g_tasks[MAX_TASKS];
static size_t g_ntasks;

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *task_arg(const struct stub_task *t, const char *key)
{
    for (size_t i = 0; i < t->nargs; i++)
        if (strcmp(t->keys[i], key) == 0)
            return t->values[i];
    return NULL;
}

static int task_set(struct stub_task *t, const char *key, const char *value)
{
    for (size_t i = 0; i < t->nargs; i++)
        if (strcmp(t->keys[i], key) == 0) {
            free(t->values[i]);
            t->values[i] = strdup(value);
            return t->values[i] ? 0 : -1;
        }
    if (t->nargs == MAX_ARGS)
        return -1;
    t->keys[t->nargs] = strdup(key);
    t->values[t->nargs] = strdup(value);
    if (!t->keys[t->nargs] || !t->values[t->nargs])
        return -1;
    t->nargs++;
    return 0;
}

int sw_stub_prof_add(const char *spec)
{
    if (g_ntasks == MAX_TASKS) {
        fprintf(stderr, "collector-stub: at most %d --profile-task\n", MAX_TASKS);
        return -1;
    }
    struct stub_task *t = &g_tasks[g_ntasks];
    int64_t now = wall_ms();
    /* Distinct CreateTimes, as OAP's (one task per service at a time, each made later). */
    t->create_ms = now + (int64_t)g_ntasks;
    int64_t start = now;
    char *copy = strdup(spec), *save = NULL, num[32];
    if (!copy)
        return -1;
    for (char *kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) {
            fprintf(stderr, "collector-stub: --profile-task: '%s' is not KEY=VALUE\n", kv);
            free(copy);
            return -1;
        }
        *eq = '\0';
        if (strcmp(kv, "service") == 0) {
            t->service = strdup(eq + 1);
        } else if (strcmp(kv, "start") == 0) {
            start = now + strtoll(eq + 1, NULL, 10);
        } else if (task_set(t, kv, eq + 1) != 0) {
            free(copy);
            return -1;
        }
    }
    free(copy);
    snprintf(num, sizeof(num), "%lld", (long long)t->create_ms);
    if (!task_arg(t, "CreateTime"))
        task_set(t, "CreateTime", num);
    else
        t->create_ms = strtoll(task_arg(t, "CreateTime"), NULL, 10);
    char id[96];
    snprintf(id, sizeof(id), "%lld_stub", (long long)t->create_ms);
    if (!task_arg(t, "TaskId"))
        task_set(t, "TaskId", id);
    if (!task_arg(t, "SerialNumber"))
        task_set(t, "SerialNumber", id);
    snprintf(num, sizeof(num), "%lld", (long long)start);
    if (!task_arg(t, "StartTime"))
        task_set(t, "StartTime", num);
    static const char *const defaults[][2] = {{"EndpointName", "GET:/"},
                                              {"Duration", "1"},
                                              {"MinDurationThreshold", "0"},
                                              {"DumpPeriod", "10"},
                                              {"MaxSamplingCount", "5"}};
    for (size_t i = 0; i < SW_ARRAY_LEN(defaults); i++)
        if (!task_arg(t, defaults[i][0]))
            task_set(t, defaults[i][0], defaults[i][1]);
    g_ntasks++;
    return 0;
}

static void put_line(FILE *out, struct json_object *o)
{
    if (out) {
        fputs(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN), out);
        fputc('\n', out);
        fflush(out);
    }
    json_object_put(o);
}

int sw_stub_prof_poll(const uint8_t *data, size_t len, FILE *out, uint8_t **reply,
                      size_t *reply_len)
{
    Skywalking__V3__ProfileTaskCommandQuery *q =
        skywalking__v3__profile_task_command_query__unpack(NULL, len, data);
    if (!q)
        return -1;
    struct json_object *o = json_object_new_object();
    json_object_object_add(o, "call", json_object_new_string("getProfileTaskCommands"));
    json_object_object_add(o, "service", json_object_new_string(q->service ? q->service : ""));
    json_object_object_add(o, "serviceInstance",
                           json_object_new_string(q->serviceinstance ? q->serviceinstance : ""));
    json_object_object_add(o, "lastCommandTime", json_object_new_int64(q->lastcommandtime));
    Skywalking__V3__Command cmds[MAX_TASKS], *cp[MAX_TASKS];
    Skywalking__V3__KeyStringValuePair kvs[MAX_TASKS][MAX_ARGS], *kp[MAX_TASKS][MAX_ARGS];
    Skywalking__V3__Commands all = SKYWALKING__V3__COMMANDS__INIT;
    struct json_object *sent = json_object_new_array();
    for (size_t i = 0; i < g_ntasks; i++) {
        const struct stub_task *t = &g_tasks[i];
        if ((t->service && strcmp(t->service, q->service ? q->service : "") != 0) ||
            t->create_ms <= q->lastcommandtime)
            continue;
        size_t k = all.n_commands;
        skywalking__v3__command__init(&cmds[k]);
        cmds[k].command = "ProfileTaskQuery";
        for (size_t a = 0; a < t->nargs; a++) {
            skywalking__v3__key_string_value_pair__init(&kvs[k][a]);
            kvs[k][a].key = t->keys[a];
            kvs[k][a].value = t->values[a];
            kp[k][a] = &kvs[k][a];
        }
        cmds[k].n_args = t->nargs;
        cmds[k].args = kp[k];
        cp[k] = &cmds[k];
        all.n_commands++;
        json_object_array_add(sent, json_object_new_string(task_arg(t, "TaskId")));
    }
    all.commands = cp;
    json_object_object_add(o, "tasks", sent);
    skywalking__v3__profile_task_command_query__free_unpacked(q, NULL);
    put_line(out, o);
    size_t n = skywalking__v3__commands__get_packed_size(&all);
    *reply = malloc(n ? n : 1);
    if (!*reply)
        return -1;
    *reply_len = skywalking__v3__commands__pack(&all, *reply);
    return 0;
}

int sw_stub_prof_snapshot(const uint8_t *data, size_t len, FILE *out)
{
    Skywalking__V3__ThreadSnapshot *s = skywalking__v3__thread_snapshot__unpack(NULL, len, data);
    if (!s)
        return -1;
    struct json_object *o = json_object_new_object();
    json_object_object_add(o, "call", json_object_new_string("collectSnapshot"));
    json_object_object_add(o, "taskId", json_object_new_string(s->taskid ? s->taskid : ""));
    json_object_object_add(o, "traceSegmentId",
                           json_object_new_string(s->tracesegmentid ? s->tracesegmentid : ""));
    json_object_object_add(o, "time", json_object_new_int64(s->time));
    json_object_object_add(o, "sequence", json_object_new_int(s->sequence));
    struct json_object *st = json_object_new_array();
    for (size_t i = 0; s->stack && i < s->stack->n_codesignatures; i++)
        json_object_array_add(st, json_object_new_string(s->stack->codesignatures[i]));
    json_object_object_add(o, "stack", st);
    skywalking__v3__thread_snapshot__free_unpacked(s, NULL);
    put_line(out, o);
    return 0;
}

int sw_stub_prof_finish(const uint8_t *data, size_t len, FILE *out)
{
    Skywalking__V3__ProfileTaskFinishReport *r =
        skywalking__v3__profile_task_finish_report__unpack(NULL, len, data);
    if (!r)
        return -1;
    struct json_object *o = json_object_new_object();
    json_object_object_add(o, "call", json_object_new_string("reportTaskFinish"));
    json_object_object_add(o, "service", json_object_new_string(r->service ? r->service : ""));
    json_object_object_add(o, "serviceInstance",
                           json_object_new_string(r->serviceinstance ? r->serviceinstance : ""));
    json_object_object_add(o, "taskId", json_object_new_string(r->taskid ? r->taskid : ""));
    skywalking__v3__profile_task_finish_report__free_unpacked(r, NULL);
    put_line(out, o);
    return 0;
}

/* ---- the view: OAP's ProfileAnalyzer / ProfileStackNode ---- */

struct snap {
    const char *seg;
    int64_t time;
    int32_t seq;
    struct json_object *stack;
};

struct node {
    const char *sig;
    struct node *child, *sibling;
    size_t nby, capby;
    const struct snap **by; /* the snapshots it was detected by */
    int64_t duration, self;
};

static struct node *node_new(const char *sig)
{
    struct node *n = calloc(1, sizeof(*n));
    if (n)
        n->sig = sig;
    return n;
}

static void node_add(struct node *n, const struct snap *s)
{
    if (n->nby == n->capby) {
        size_t cap = n->capby ? 2 * n->capby : 8;
        const struct snap **b = realloc(n->by, cap * sizeof(*b));
        if (!b)
            return;
        n->by = b;
        n->capby = cap;
    }
    n->by[n->nby++] = s;
}

static int by_seq(const void *a, const void *b)
{
    const struct snap *x = *(const struct snap *const *)a, *y = *(const struct snap *const *)b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* duration: over runs of consecutive sequences, last dump time minus first; self = duration
 * minus the children's durations. */
static void node_calc(struct node *n)
{
    n->duration = 0;
    if (n->nby > 1) {
        qsort(n->by, n->nby, sizeof(n->by[0]), by_seq);
        const struct snap *start = n->by[0], *end = n->by[0];
        for (size_t i = 1; i < n->nby; i++) {
            if (n->by[i]->seq == end->seq + 1) {
                end = n->by[i];
                continue;
            }
            n->duration += end->time - start->time;
            start = end = n->by[i];
        }
        n->duration += end->time - start->time;
    }
    int64_t kids = 0;
    for (struct node *c = n->child; c; c = c->sibling) {
        node_calc(c);
        kids += c->duration;
    }
    n->self = n->duration - kids;
}

static void node_print(const struct node *n, int depth)
{
    printf("%8zu %8lld %8lld  %*s%s\n", n->nby, (long long)n->duration, (long long)n->self,
           2 * depth, "", n->sig);
    for (const struct node *c = n->child; c; c = c->sibling)
        node_print(c, depth + 1);
}

static void node_free(struct node *n)
{
    while (n) {
        struct node *s = n->sibling;
        node_free(n->child);
        free(n->by);
        free(n);
        n = s;
    }
}

/* Appends `sig` to the sibling list at *head (or finds it there). */
static struct node *child_of(struct node **head, const char *sig)
{
    struct node **p = head;
    for (; *p; p = &(*p)->sibling)
        if (strcmp((*p)->sig, sig) == 0)
            return *p;
    return *p = node_new(sig);
}

static int by_seg_seq(const void *a, const void *b)
{
    const struct snap *x = a, *y = b;
    int c = strcmp(x->seg, y->seg);
    return c ? c : x->seq < y->seq ? -1 : x->seq > y->seq;
}

int sw_stub_profile_main(int argc, char **argv)
{
    const char *file = NULL, *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--segment") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (!file && argv[i][0] != '-')
            file = argv[i];
        else {
            fprintf(stderr, "usage: collector-stub profile FILE [--segment ID]\n");
            return 2;
        }
    }
    if (!file) {
        fprintf(stderr, "usage: collector-stub profile FILE [--segment ID]\n");
        return 2;
    }
    FILE *f = fopen(file, "r");
    if (!f) {
        fprintf(stderr, "profile: %s: %s\n", file, strerror(errno));
        return 1;
    }
    struct snap *snaps = NULL;
    struct json_object **objs = NULL;
    size_t n = 0, cap = 0, skipped = 0;
    char *line = NULL;
    size_t lcap = 0;
    while (getline(&line, &lcap, f) > 0) {
        struct json_object *o = json_tokener_parse(line), *v;
        const char *call = NULL;
        if (o && json_object_object_get_ex(o, "call", &v))
            call = json_object_get_string(v);
        if (!o || !call || strcmp(call, "collectSnapshot") != 0) {
            if (o)
                json_object_put(o);
            else
                skipped++;
            continue;
        }
        struct json_object *seg, *tm, *sq, *st;
        if (!json_object_object_get_ex(o, "traceSegmentId", &seg) ||
            !json_object_object_get_ex(o, "time", &tm) ||
            !json_object_object_get_ex(o, "sequence", &sq) ||
            !json_object_object_get_ex(o, "stack", &st) ||
            !json_object_is_type(st, json_type_array)) {
            json_object_put(o);
            skipped++;
            continue;
        }
        if (only && strcmp(json_object_get_string(seg), only) != 0) {
            json_object_put(o);
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            snaps = realloc(snaps, cap * sizeof(*snaps));
            objs = realloc(objs, cap * sizeof(*objs));
            if (!snaps || !objs) {
                fclose(f);
                return 1;
            }
        }
        snaps[n] = (struct snap){json_object_get_string(seg), json_object_get_int64(tm),
                                 json_object_get_int(sq), st};
        objs[n++] = o;
    }
    free(line);
    fclose(f);
    if (skipped)
        fprintf(stderr, "profile: %zu line(s) of %s not read\n", skipped, file);
    qsort(snaps, n, sizeof(*snaps), by_seg_seq);
    int trees = 0;
    for (size_t a = 0; a < n;) {
        size_t b = a;
        while (b < n && strcmp(snaps[b].seg, snaps[a].seg) == 0)
            b++;
        struct node *roots = NULL;
        for (size_t i = a; i < b; i++) {
            struct node **level = &roots, *nd = NULL;
            size_t depth = json_object_array_length(snaps[i].stack);
            for (size_t d = 0; d < depth; d++) {
                const char *sig =
                    json_object_get_string(json_object_array_get_idx(snaps[i].stack, d));
                nd = child_of(level, sig ? sig : "");
                if (!nd)
                    break;
                node_add(nd, &snaps[i]);
                level = &nd->child;
            }
        }
        printf("segment %s: %zu snapshot(s), sequences %d..%d\n", snaps[a].seg, b - a, snaps[a].seq,
               snaps[b - 1].seq);
        printf("%8s %8s %8s  %s\n", "count", "dur_ms", "self_ms", "signature");
        for (struct node *r = roots; r; r = r->sibling) {
            node_calc(r);
            node_print(r, 0);
            trees++;
        }
        node_free(roots);
        a = b;
    }
    for (size_t i = 0; i < n; i++)
        json_object_put(objs[i]);
    free(snaps);
    free(objs);
    if (trees == 0)
        printf("no snapshots\n");
    return 0;
}
