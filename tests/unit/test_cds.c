/*
 * test_cds.c - the reporter's CDS answers (agent/reporter/cds.c) into a real shared block:
 * a key set, the same UUID again (nothing), a key removed (back to agent.config), bad values
 * (the key keeps what it had), unknown keys, a value of 5,000 bytes, a list too long, an answer
 * that is not protobuf, a command of another kind. With --seeds DIR, writes the answers it
 * makes to DIR (the fuzz_cds corpus).
 */
#include "common.h"

#include "cds.h"
#include "config.h"
#include "drain.h"
#include "svcblock.h"

#include "check.h"

#include "common/Command.pb-c.h"

#include <sys/stat.h>

void sw_cds_note_instances(struct sw_cds *c, const struct sw_drain_info *info, int n,
                           uint64_t now_ms);

static char g_dir[256];
static const char *g_seeds;
static int g_nseed;

/* Packs a ConfigurationDiscoveryCommand with UUID `uuid` and the pairs kv[0..n) (key, value). */
static size_t answer(uint8_t *out, size_t cap, const char *uuid, const char *const *kv, size_t n)
{
    Skywalking__V3__KeyStringValuePair p[16], *pp[16];
    size_t a = 0;
    skywalking__v3__key_string_value_pair__init(&p[a]);
    p[a].key = "SerialNumber";
    p[a++].value = "1";
    skywalking__v3__key_string_value_pair__init(&p[a]);
    p[a].key = "UUID";
    p[a++].value = (char *)uuid;
    for (size_t i = 0; i < n; i++, a++) {
        skywalking__v3__key_string_value_pair__init(&p[a]);
        p[a].key = (char *)kv[2 * i];
        p[a].value = (char *)kv[2 * i + 1];
    }
    for (size_t i = 0; i < a; i++)
        pp[i] = &p[i];
    Skywalking__V3__Command cmd = SKYWALKING__V3__COMMAND__INIT, *cp = &cmd;
    cmd.command = "ConfigurationDiscoveryCommand";
    cmd.n_args = a;
    cmd.args = pp;
    Skywalking__V3__Commands cmds = SKYWALKING__V3__COMMANDS__INIT;
    cmds.n_commands = 1;
    cmds.commands = &cp;
    size_t len = skywalking__v3__commands__get_packed_size(&cmds);
    CHECK(len <= cap);
    skywalking__v3__commands__pack(&cmds, out);
    if (g_seeds) {
        char p2[512];
        snprintf(p2, sizeof(p2), "%s/seed-%02d", g_seeds, g_nseed++);
        FILE *f = fopen(p2, "wb");
        CHECK(f && fwrite(out, 1, len, f) == len);
        fclose(f);
    }
    return len;
}

static struct sw_svc_dyn g_d;

static void read_block(void)
{
    struct sw_svc *b = NULL;
    CHECK_EQ(sw_svc_open(g_dir, "svc-cds", "inst-1", false, &b), 0);
    uint64_t seq;
    CHECK(sw_svc_read(b, &g_d, &seq));
    sw_svc_close(b);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--seeds") == 0)
        g_seeds = argv[2];
    snprintf(g_dir, sizeof(g_dir), "/tmp/sw-cds-XXXXXX");
    CHECK(mkdtemp(g_dir) != NULL);
    chmod(g_dir, 0700);
    static struct sw_config cfg;
    sw_config_defaults(&cfg);
    cfg.sample_n_per_3_secs = -1;
    struct sw_cds *c = sw_cds_new(&cfg, g_dir);
    CHECK(c);
    struct sw_drain_info info;
    memset(&info, 0, sizeof(info));
    info.alive = true;
    snprintf(info.meta.service, sizeof(info.meta.service), "svc-cds");
    snprintf(info.meta.instance, sizeof(info.meta.instance), "inst-1");
    sw_cds_note_instances(c, &info, 1, 1000);

    static uint8_t buf[65536];
    size_t n;
    /* 1. OAP sets both keys. */
    const char *kv1[] = {"agent.sample_n_per_3_secs", "1", "agent.ignore_suffix", ".zip,.tar"};
    n = answer(buf, sizeof(buf), "u1", kv1, 2);
    CHECK_EQ(sw_cds_apply(c, "svc-cds", buf, n, 1000), 1);
    read_block();
    CHECK_EQ(g_d.set, SW_DYN_SAMPLE | SW_DYN_IGNORE_SUFFIX);
    CHECK_EQ(g_d.sample_n_per_3_secs, 1);
    CHECK_STR(g_d.uuid, "u1");
    CHECK_EQ(g_d.ignore_suffix.n, 2);
    CHECK_STR(g_d.ignore_suffix.item[1], "tar");
    /* 2. The same UUID: nothing to do. */
    CHECK_EQ(sw_cds_apply(c, "svc-cds", buf, n, 1000), 0);
    /* 3. agent.ignore_suffix removed: back to the file's; the sample key stays. */
    const char *kv3[] = {"agent.sample_n_per_3_secs", "1"};
    n = answer(buf, sizeof(buf), "u3", kv3, 1);
    CHECK_EQ(sw_cds_apply(c, "svc-cds", buf, n, 1000), 1);
    read_block();
    CHECK_EQ(g_d.set, SW_DYN_SAMPLE);
    CHECK_EQ(g_d.ignore_suffix.n, 0);
    /* 4. Bad values, an unknown key, a key swagent cannot change: the keys keep what they had. */
    static char huge[5001];
    memset(huge, '7', 5000);
    const char *kv4[] = {"agent.sample_n_per_3_secs",
                         "99999999999",
                         "agent.ignore_suffix",
                         ".a,.b,.c,.d,.e,.f,.g,.h,.i,.j,.k,.l,.m,.n,.o,.p,"
                         ".q,.r,.s,.t,.u,.v,.w,.x,.y,.z,.aa,.bb,.cc,.dd,"
                         ".ee,.ff,.gg",
                         "agent.unknown",
                         "1",
                         "agent.span_limit_per_segment",
                         "10"};
    n = answer(buf, sizeof(buf), "u4", kv4, 4);
    CHECK_EQ(sw_cds_apply(c, "svc-cds", buf, n, 1000), 1); /* a new UUID, noted */
    read_block();
    CHECK_EQ(g_d.set, SW_DYN_SAMPLE | SW_DYN_SPAN_LIMIT);
    CHECK_EQ(g_d.sample_n_per_3_secs, 1);
    CHECK_EQ(g_d.span_limit_per_segment, 10);
    /* agent.span_limit_per_segment out of range: it keeps OAP's 10. */
    const char *kv4b[] = {"agent.sample_n_per_3_secs", "1", "agent.span_limit_per_segment", "0"};
    n = answer(buf, sizeof(buf), "u4b", kv4b, 2);
    CHECK_EQ(sw_cds_apply(c, "svc-cds", buf, n, 1000), 1);
    read_block();
    CHECK_EQ(g_d.set, SW_DYN_SAMPLE | SW_DYN_SPAN_LIMIT);
    CHECK_EQ(g_d.span_limit_per_segment, 10);
    const char *kv5[] = {"agent.sample_n_per_3_secs", huge};
    n = answer(buf, sizeof(buf), "u5", kv5, 1);
    CHECK_EQ(sw_cds_apply(c, "svc-cds", buf, n, 1000), 1);
    read_block();
    CHECK_EQ(g_d.sample_n_per_3_secs, 1);
    const char *kv6[] = {"agent.sample_n_per_3_secs", "two", "agent.ignore_suffix", ""};
    n = answer(buf, sizeof(buf), "u6", kv6, 2);
    CHECK_EQ(sw_cds_apply(c, "svc-cds", buf, n, 1000), 1);
    read_block();
    CHECK_EQ(g_d.set, SW_DYN_SAMPLE);
    CHECK_EQ(g_d.sample_n_per_3_secs, 1);
    /* 5. Not protobuf: -EBADMSG, nothing changes. */
    static const uint8_t junk[] = {0x0f, 0xff, 0xff, 'x'};
    CHECK_EQ(sw_cds_apply(c, "svc-cds", junk, sizeof(junk), 1000), -EBADMSG);
    read_block();
    CHECK_STR(g_d.uuid, "u6");
    /* 6. Everything removed (OAP's EMPTY): the file's values. */
    n = answer(buf, sizeof(buf), "empty", NULL, 0);
    CHECK_EQ(sw_cds_apply(c, "svc-cds", buf, n, 1000), 1);
    read_block();
    CHECK_EQ(g_d.set, 0);
    /* 7. A negative budget (sample everything) and 0 are values too. */
    const char *kv7[] = {"agent.sample_n_per_3_secs", "-1"};
    n = answer(buf, sizeof(buf), "u7", kv7, 1);
    CHECK_EQ(sw_cds_apply(c, "svc-cds", buf, n, 1000), 1);
    read_block();
    CHECK_EQ(g_d.set, SW_DYN_SAMPLE);
    CHECK_EQ(g_d.sample_n_per_3_secs, -1);
    sw_cds_free(c);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
    CHECK_EQ(system(cmd), 0);
    printf("ok - test_cds\n");
    return 0;
}
