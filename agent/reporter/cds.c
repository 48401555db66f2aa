/*
 * cds.c - OAP's ConfigurationDiscoveryService, reporter side (see cds.h).
 *
 * Rules: swagent-reporter only; malloc and stdio are fine. The answer is untrusted input:
 * protobuf-c unpacks it (NULL for garbage), every value goes through the agent.config rules
 * (sw_config_set) before it is published, and what is published is bounded (svcblock.h).
 */
#include "common.h"

#include "cds.h"
#include "config.h"
#include "drain.h"
#include "log.h"
#include "svcblock.h"
#include "transport.h"

#include "common/Command.pb-c.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CDS_SERVICES 64   /* services followed at once (a reporter serves one user's) */
#define CDS_INSTANCES 256 /* (service, instance) pairs whose blocks were published */
#define CDS_VALUE_MAX 4096

struct cds_service {
    char name[SW_SVC_NAME_MAX];
    uint64_t next_ms;      /* monotonic ms of the next question; 0: at once */
    bool seen;             /* named by a ring in this pass */
    bool applied;          /* dyn holds an answer */
    bool unimplemented;    /* the collector has no CDS: asked again only every 10 intervals */
    bool error_logged;     /* the last answer was an error status, logged once */
    struct sw_svc_dyn dyn; /* what the blocks of this service are given */
};

struct cds_instance {
    char service[SW_SVC_NAME_MAX];
    char instance[SW_SVC_NAME_MAX];
    uint64_t published; /* cds_service.dyn.applied_ms last published to its block (+1) */
    bool seen;
};

struct sw_cds {
    const struct sw_config *cfg;
    char dir[PATH_MAX];
    struct cds_service svc[CDS_SERVICES];
    int nsvc;
    struct cds_instance inst[CDS_INSTANCES];
    int ninst;
    uint64_t next_note_ms; /* the rings' instances are looked at once a second */
};

static const char *const supported[] = {"agent.sample_n_per_3_secs", "agent.ignore_suffix",
                                        "agent.span_limit_per_segment"};
static const uint32_t supported_bit[] = {SW_DYN_SAMPLE, SW_DYN_IGNORE_SUFFIX, SW_DYN_SPAN_LIMIT};

struct sw_cds *sw_cds_new(const struct sw_config *cfg, const char *runtime_dir)
{
    struct sw_cds *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->cfg = cfg;
    snprintf(c->dir, sizeof(c->dir), "%s", runtime_dir);
    return c;
}

void sw_cds_free(struct sw_cds *c)
{
    free(c);
}

static uint64_t epoch_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static struct cds_service *svc_get(struct sw_cds *c, const char *name, bool add)
{
    for (int i = 0; i < c->nsvc; i++)
        if (strcmp(c->svc[i].name, name) == 0)
            return &c->svc[i];
    if (!add || c->nsvc == CDS_SERVICES || strlen(name) >= SW_SVC_NAME_MAX)
        return NULL;
    struct cds_service *s = &c->svc[c->nsvc++];
    memset(s, 0, sizeof(*s));
    snprintf(s->name, sizeof(s->name), "%s", name);
    return s;
}

/* Gives the block of (service, instance) the service's configuration. */
static void publish_one(struct sw_cds *c, const struct cds_service *s, const char *instance,
                        uint64_t now_ms)
{
    struct sw_svc *b = NULL;
    int rc = sw_svc_open(c->dir, s->name, instance, true, &b);
    if (rc < 0) {
        SW_LOGW("cds: cannot open the shared block of service %s instance %s in %s (error %d): "
                "that instance keeps its agent.config values",
                s->name, instance, c->dir, -rc);
        return;
    }
    (void)now_ms;
    sw_svc_publish(b, &s->dyn, false);
    sw_svc_set_polled(b, epoch_ms());
    sw_svc_close(b);
}

/* Publishes the service's configuration to the block of every instance of it known. */
static void publish_all(struct sw_cds *c, const struct cds_service *s, uint64_t now_ms)
{
    for (int i = 0; i < c->ninst; i++) {
        if (strcmp(c->inst[i].service, s->name) != 0)
            continue;
        publish_one(c, s, c->inst[i].instance, now_ms);
        c->inst[i].published = s->dyn.applied_ms + 1;
    }
}

static const char *arg_value(const Skywalking__V3__Command *cmd, const char *key)
{
    for (size_t i = 0; i < cmd->n_args; i++)
        if (cmd->args[i] && cmd->args[i]->key && strcmp(cmd->args[i]->key, key) == 0)
            return cmd->args[i]->value ? cmd->args[i]->value : "";
    return NULL;
}

/* Applies one ConfigurationDiscoveryCommand to s->dyn; true when it changed. */
static bool apply_command(struct sw_cds *c, struct cds_service *s,
                          const Skywalking__V3__Command *cmd, uint64_t epoch)
{
    const char *uuid = arg_value(cmd, "UUID");
    if (!uuid)
        uuid = "";
    if (s->applied && strncmp(uuid, s->dyn.uuid, sizeof(s->dyn.uuid)) == 0)
        return false;
    struct sw_svc_dyn d = s->dyn;
    /* Unknown keys: logged, ignored. */
    for (size_t i = 0; i < cmd->n_args; i++) {
        const Skywalking__V3__KeyStringValuePair *kv = cmd->args[i];
        if (!kv || !kv->key || strcmp(kv->key, "UUID") == 0 || strcmp(kv->key, "SerialNumber") == 0)
            continue;
        bool known = false;
        for (size_t k = 0; k < SW_ARRAY_LEN(supported); k++)
            known |= strcmp(kv->key, supported[k]) == 0;
        if (!known)
            SW_LOGW("cds: service %s: OAP sets %.*s, which swagent cannot change at runtime "
                    "(ignored; supported: agent.sample_n_per_3_secs, agent.ignore_suffix, "
                    "agent.span_limit_per_segment)",
                    s->name, 200, kv->key);
    }
    for (size_t k = 0; k < SW_ARRAY_LEN(supported); k++) {
        const char *v = arg_value(cmd, supported[k]);
        if (!v || !*v) {
            d.set &= ~supported_bit[k]; /* removed in OAP: back to agent.config */
            continue;
        }
        size_t len = strnlen(v, CDS_VALUE_MAX + 1);
        struct sw_config tmp = *c->cfg;
        int rc = len > CDS_VALUE_MAX ? -EINVAL : sw_config_set(&tmp, supported[k], v, len, "OAP");
        if (rc != 0) {
            if (len > CDS_VALUE_MAX)
                SW_LOGW("cds: service %s: OAP's value for %s is %zu+ bytes (ignored)", s->name,
                        supported[k], len);
            continue; /* the key keeps what it had */
        }
        d.set |= supported_bit[k];
        if (supported_bit[k] == SW_DYN_SAMPLE)
            d.sample_n_per_3_secs = tmp.sample_n_per_3_secs;
        else if (supported_bit[k] == SW_DYN_SPAN_LIMIT)
            d.span_limit_per_segment = tmp.span_limit_per_segment;
        else
            d.ignore_suffix = tmp.ignore_suffix;
    }
    if (!(d.set & SW_DYN_SAMPLE))
        d.sample_n_per_3_secs = 0;
    if (!(d.set & SW_DYN_SPAN_LIMIT))
        d.span_limit_per_segment = 0;
    if (!(d.set & SW_DYN_IGNORE_SUFFIX))
        memset(&d.ignore_suffix, 0, sizeof(d.ignore_suffix));
    snprintf(d.uuid, sizeof(d.uuid), "%s", uuid);
    d.applied_ms = epoch;
    s->dyn = d;
    s->applied = true;
    char sv[48] = "from agent.config";
    if (d.set & SW_DYN_SAMPLE)
        snprintf(sv, sizeof(sv), "= %d (OAP)", d.sample_n_per_3_secs);
    SW_LOGI("cds: service %s: configuration %.*s... applied: agent.sample_n_per_3_secs %s, "
            "agent.ignore_suffix %s",
            s->name, 16, d.uuid[0] ? d.uuid : "(no uuid)", sv,
            (d.set & SW_DYN_IGNORE_SUFFIX) ? "from OAP" : "from agent.config");
    return true;
}

int sw_cds_apply(struct sw_cds *c, const char *service, const uint8_t *p, size_t n, uint64_t now_ms)
{
    struct cds_service *s = svc_get(c, service, true);
    if (!s)
        return 0;
    Skywalking__V3__Commands *cmds = skywalking__v3__commands__unpack(NULL, n, p);
    if (!cmds) {
        SW_LOGW("cds: service %s: OAP's answer (%zu bytes) does not parse as Commands "
                "(ignored, nothing changes)",
                service, n);
        return -EBADMSG;
    }
    bool changed = false;
    for (size_t i = 0; i < cmds->n_commands; i++) {
        const Skywalking__V3__Command *cmd = cmds->commands[i];
        if (!cmd || !cmd->command || strcmp(cmd->command, "ConfigurationDiscoveryCommand") != 0)
            continue;
        changed |= apply_command(c, s, cmd, epoch_ms());
    }
    skywalking__v3__commands__free_unpacked(cmds, NULL);
    if (changed)
        publish_all(c, s, now_ms);
    return changed ? 1 : 0;
}

/* Notes the (service, instance) pairs of the rings; a new one gets its service's configuration. */
SW_STATIC void sw_cds_note_instances(struct sw_cds *c, const struct sw_drain_info *info, int n,
                                     uint64_t now_ms);
SW_STATIC void sw_cds_note_instances(struct sw_cds *c, const struct sw_drain_info *info, int n,
                                     uint64_t now_ms)
{
    for (int i = 0; i < c->nsvc; i++)
        c->svc[i].seen = false;
    for (int k = 0; k < c->ninst; k++)
        c->inst[k].seen = false;
    for (int i = 0; i < n; i++) {
        if (!info[i].alive)
            continue;
        const char *svc = info[i].meta.service, *ins = info[i].meta.instance;
        struct cds_service *s = svc_get(c, svc, true);
        if (!s)
            continue;
        s->seen = true;
        int k;
        for (k = 0; k < c->ninst; k++)
            if (strcmp(c->inst[k].service, svc) == 0 && strcmp(c->inst[k].instance, ins) == 0)
                break;
        if (k == c->ninst) {
            if (c->ninst == CDS_INSTANCES)
                continue;
            memset(&c->inst[k], 0, sizeof(c->inst[k]));
            snprintf(c->inst[k].service, sizeof(c->inst[k].service), "%s", svc);
            snprintf(c->inst[k].instance, sizeof(c->inst[k].instance), "%s", ins);
            c->ninst++;
        }
        c->inst[k].seen = true;
        if (s->applied && c->inst[k].published != s->dyn.applied_ms + 1) {
            publish_one(c, s, ins, now_ms);
            c->inst[k].published = s->dyn.applied_ms + 1;
        }
    }
    /* Instances with no live process and services with none are forgotten (a service that
     * comes back is asked again with no UUID, and OAP answers with its configuration). */
    int m = 0;
    for (int k = 0; k < c->ninst; k++)
        if (c->inst[k].seen)
            c->inst[m++] = c->inst[k];
    c->ninst = m;
    m = 0;
    for (int i = 0; i < c->nsvc; i++)
        if (c->svc[i].seen)
            c->svc[m++] = c->svc[i];
    c->nsvc = m;
}

void sw_cds_tick(struct sw_cds *c, struct sw_transport *t, const struct sw_drain_info *info, int n,
                 uint64_t now_ms)
{
    if (!c || c->cfg->cds_interval <= 0)
        return;
    if (now_ms < c->next_note_ms)
        return; /* the services' next questions are at least a second apart anyway */
    c->next_note_ms = now_ms + 1000;
    sw_cds_note_instances(c, info, n, now_ms);
    for (int i = 0; i < c->nsvc; i++) {
        struct cds_service *s = &c->svc[i];
        if (!s->seen || now_ms < s->next_ms || sw_transport_mgmt_backing_off(t))
            continue;
        uint64_t every = (uint64_t)c->cfg->cds_interval * 1000u;
        s->next_ms = now_ms + (s->unimplemented ? 10 * every : every);
        uint8_t *ans = NULL;
        size_t len = 0;
        int rc = sw_transport_fetch_config(t, s->name, s->applied ? s->dyn.uuid : "", &ans, &len);
        if (rc == -ENOSYS) {
            if (!s->unimplemented)
                SW_LOGW("cds: the collector has no ConfigurationDiscoveryService "
                        "(UNIMPLEMENTED): service %s keeps its agent.config values",
                        s->name);
            s->unimplemented = true;
            continue;
        }
        s->unimplemented = false;
        if (rc == -EIO && !s->error_logged) {
            const char *msg = "";
            int st = sw_transport_last_status(t, &msg);
            SW_LOGW("cds: service %s: the collector answered fetchConfigurations with status %d "
                    "(%s): asked again every interval, the values in force stay",
                    s->name, st, msg);
        }
        s->error_logged = rc == -EIO;
        if (rc != 0)
            continue; /* asked again next interval; the transport logs and backs off */
        (void)sw_cds_apply(c, s->name, ans, len, now_ms);
        free(ans);
        /* Status: when OAP last answered, in every block of the service. */
        for (int k = 0; k < c->ninst; k++) {
            if (strcmp(c->inst[k].service, s->name) != 0)
                continue;
            struct sw_svc *b = NULL;
            if (sw_svc_open(c->dir, s->name, c->inst[k].instance, false, &b) == 0) {
                sw_svc_set_polled(b, epoch_ms());
                sw_svc_close(b);
            }
        }
    }
}
