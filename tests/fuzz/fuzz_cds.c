/*
 * fuzz_cds.c - libFuzzer target: any bytes as OAP's answer to fetchConfigurations, applied by
 * the reporter (agent/reporter/cds.c) and published into a real shared block; the block read
 * back must be bounded (list counts, strings) and a sample budget published only with its bit.
 * Seeds: tests/fuzz/corpus/cds (written by test_cds --seeds DIR). Linked with
 * tests/fuzz/replay_conf_prop.c, a main() replays the corpus instead (plain gcc).
 */
#include "common.h"

#include "cds.h"
#include "config.h"
#include "drain.h"
#include "svcblock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void sw_cds_note_instances(struct sw_cds *c, const struct sw_drain_info *info, int n,
                           uint64_t now_ms);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct sw_cds *g_c;
static char g_dir[64];
static struct sw_config g_cfg;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_c) {
        snprintf(g_dir, sizeof(g_dir), "/tmp/sw-fuzzcds-XXXXXX");
        if (!mkdtemp(g_dir))
            abort();
        chmod(g_dir, 0700);
        sw_config_defaults(&g_cfg);
        g_c = sw_cds_new(&g_cfg, g_dir);
        struct sw_drain_info info;
        memset(&info, 0, sizeof(info));
        info.alive = true;
        snprintf(info.meta.service, sizeof(info.meta.service), "svc");
        snprintf(info.meta.instance, sizeof(info.meta.instance), "i");
        sw_cds_note_instances(g_c, &info, 1, 1);
    }
    (void)sw_cds_apply(g_c, "svc", data, size, 1);
    struct sw_svc *b = NULL;
    if (sw_svc_open(g_dir, "svc", "i", false, &b) != 0)
        return 0; /* nothing published yet */
    struct sw_svc_dyn d;
    uint64_t seq;
    if (!sw_svc_read(b, &d, &seq))
        abort(); /* one writer, not writing now */
    if ((d.set & ~SW_DYN_ALL) || d.ignore_suffix.n < 0 || d.ignore_suffix.n > SW_CFG_LIST_MAX ||
        strnlen(d.uuid, sizeof(d.uuid)) == sizeof(d.uuid) ||
        (!(d.set & SW_DYN_SAMPLE) && d.sample_n_per_3_secs != 0) ||
        (d.sample_n_per_3_secs > 1000000) ||
        ((d.set & SW_DYN_SPAN_LIMIT) &&
         (d.span_limit_per_segment < 1 || d.span_limit_per_segment > 65535)))
        abort();
    sw_svc_close(b);
    return 0;
}
