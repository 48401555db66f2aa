/*
 * config.h - agent.config (SkyWalking's `key=${ENV:default}` format) and environment overrides.
 *
 * Loaded once, before any application thread can reach the agent (constructor) and by the
 * reporter at start. The hot path reads only the precomputed fields of the const result.
 * An unknown key or a bad value is logged once with its file and line; the default is used.
 * A broken or missing file never stops the host program: defaults are used.
 */
#ifndef SW_CONFIG_H
#define SW_CONFIG_H

#include "common.h"

#include <limits.h>

#define SW_CFG_NAME_MAX 128
#define SW_CFG_STR_MAX 256
#define SW_CFG_LIST_MAX 32  /* entries in a comma list */
#define SW_CFG_ITEM_MAX 32  /* bytes per list entry */

struct sw_cfg_list {
    int n;
    char item[SW_CFG_LIST_MAX][SW_CFG_ITEM_MAX];
};

struct sw_config {
    /* agent.* */
    char service_name[SW_CFG_NAME_MAX];   /* final name: `name|namespace|cluster` when set */
    char instance_name[SW_CFG_NAME_MAX];  /* default `<uuid-no-dashes>@<first ipv4>` */
    char namespace_[SW_CFG_NAME_MAX];
    char cluster[SW_CFG_NAME_MAX];
    int sample_n_per_3_secs;              /* <= 0: sample all (default -1) */
    struct sw_cfg_list ignore_suffix;     /* without the leading '.' */
    int span_limit_per_segment;           /* default 300 */
    int operation_name_threshold;         /* default 150 */
    bool keep_tracing;
    char authentication[SW_CFG_STR_MAX];
    bool force_tls;
    char ssl_trusted_ca_path[PATH_MAX];
    char ssl_key_path[PATH_MAX];
    char ssl_cert_chain_path[PATH_MAX];
    /* collector.* */
    char backend_service[SW_CFG_STR_MAX]; /* default 127.0.0.1:11800 */
    int heartbeat_period;                 /* seconds, default 30 */
    int properties_report_period_factor;  /* default 10 */
    int grpc_channel_check_interval;      /* seconds, default 30 */
    int grpc_upstream_timeout;            /* seconds, default 30 */
    /* buffer.* */
    int channel_size;                     /* default 5 */
    int buffer_size;                      /* default 300 */
    /* logging.* */
    int log_level;                        /* enum sw_log_level (log.h), default INFO */
    char log_file_name[SW_CFG_NAME_MAX];  /* default swagent.log */
    char log_dir[PATH_MAX];               /* default: the runtime directory */
    long log_max_file_size;               /* bytes, default 314572800 */
    /* correlation.* */
    int correlation_element_max_number;   /* default 3 */
    int correlation_value_max_length;     /* default 128 */
    /* plugin.* */
    int peer_max_length;                  /* default 200 */
    int http_params_length_threshold;     /* default 1024 */
    int http_headers_length_threshold;    /* default 2048 */
    struct sw_cfg_list include_http_headers;   /* lower-cased header names */
    struct sw_cfg_list propagation_exclude_ports;
    /* swagent.* (this agent's own keys) */
    char runtime_dir[PATH_MAX];           /* rings, lock, default $XDG_RUNTIME_DIR/swagent or /tmp/swagent-<uid> */
    char reporter_path[PATH_MAX];         /* default: swagent-reporter beside libswagent.so */
    int reporter_idle_exit;               /* seconds with no live traced process before exit; default 10 */
    bool grpc_gzip;                       /* gzip messages to the collector, default true */
    long ring_bytes;                      /* derived: channel_size * buffer_size * 2 KiB, min 64 KiB */
    long ring_total_cap;                  /* bytes of all rings of the user, default 256 MiB */
    bool disabled;                        /* swagent.enabled=false or SW_AGENT_DISABLE */
};

/*
 * Fills `c` with defaults, then applies the file, then environment overrides. `path` NULL
 * means: $SW_AGENT_CONFIG, else agent.config beside the loaded library (`self_dir`, may be
 * NULL). Allocation-free, stdio-free (open/read on a fixed buffer), so safe in a constructor.
 * Returns 0, or a negative errno when the file could not be read (defaults are in `c` then).
 */
int sw_config_load(struct sw_config *c, const char *path, const char *self_dir);

/* Fills `c` with defaults only. */
void sw_config_defaults(struct sw_config *c);

/* True when `path` (no query string) ends in one of the ignore_suffix entries. */
bool sw_config_ignored_path(const struct sw_config *c, const char *path, size_t len);

#endif /* SW_CONFIG_H */
