/*
 * fuzz_config.c - libFuzzer target for the agent.config parser (the parse step of
 * sw_config_load on an in-memory file image, including ${ENV:default} expansion). Checks,
 * beyond "no crash": every string field stays NUL-terminated and every list within bounds.
 */
#include "common.h"

#include "config.h"

#include <stdlib.h>
#include <string.h>

/* config.c internal, reachable because the fuzzer is built with SW_TESTING. */
void sw_config_parse_buffer(struct sw_config *c, const char *buf, size_t len, const char *fname,
                            bool *seen);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_list(const struct sw_cfg_list *l)
{
    if (l->n < 0 || l->n > SW_CFG_LIST_MAX)
        abort();
    for (int i = 0; i < l->n; i++)
        if (memchr(l->item[i], '\0', SW_CFG_ITEM_MAX) == NULL || l->item[i][0] == '\0')
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct sw_config c;
    bool seen[128];

    if (size > SW_CONFIG_FILE_MAX)
        return 0;
    sw_config_defaults(&c);
    sw_config_parse_buffer(&c, (const char *)data, size, "fuzz.config", seen);
    if (memchr(c.service_name, '\0', sizeof(c.service_name)) == NULL ||
        memchr(c.backend_service, '\0', sizeof(c.backend_service)) == NULL ||
        memchr(c.log_file_name, '\0', sizeof(c.log_file_name)) == NULL ||
        memchr(c.runtime_dir, '\0', sizeof(c.runtime_dir)) == NULL ||
        memchr(c.authentication, '\0', sizeof(c.authentication)) == NULL)
        abort();
    if (c.log_level < 0 || c.log_level > 4 || c.channel_size < 1 || c.buffer_size < 1 ||
        c.span_limit_per_segment < 1 || c.span_limit_per_segment > 65535)
        abort();
    check_list(&c.ignore_suffix);
    check_list(&c.include_http_headers);
    check_list(&c.propagation_exclude_ports);
    check_list(&c.correlation_auto_tag_keys);
    for (int i = 0; i < c.include_http_headers.n; i++)
        for (const char *p = c.include_http_headers.item[i]; *p; p++)
            if (*p >= 'A' && *p <= 'Z')
                abort();
    return 0;
}
