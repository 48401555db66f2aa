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
#define SW_CFG_LIST_MAX 32 /* entries in a comma list */
#define SW_CFG_ITEM_MAX 32 /* bytes per list entry */

struct sw_cfg_list {
    int n;
    char item[SW_CFG_LIST_MAX][SW_CFG_ITEM_MAX];
    uint32_t lens;     /* bit k: an item is k bytes long (filters for the hot path) */
    uint64_t first[4]; /* bit c: an item begins with byte c, ASCII case folded (c | 0x20) */
};

/*
 * Room for a path setting, its terminating NUL included. Smaller than PATH_MAX (4096) so that
 * the paths every process sets share pages: each 4 KiB slot cost a page fault at start-up.
 * A longer value is refused with a log line, like any value too long for its key.
 */
#define SW_CFG_PATH_MAX 1024

/*
 * sw_config.sample_src and ignore_suffix_src besides a file line (> 0): the default, the key's
 * well-known environment variable (no file line), or a file line whose ${VAR:default} took VAR
 * from the environment.
 */
#define SW_CFG_SRC_DEFAULT 0
#define SW_CFG_SRC_ENV (-1)
#define SW_CFG_SRC_ENV_SUB (-2)

/* Bits of sw_config.paths_set: the path was given a non-empty value (file or environment). */
#define SW_CFG_SET_RUNTIME_DIR 1u
#define SW_CFG_SET_LOG_DIR 2u
#define SW_CFG_SET_CA_PATH 4u

/* swagent.log_capture */
enum { SW_LOGCAP_OFF = 0, SW_LOGCAP_ON = 1, SW_LOGCAP_ALL = 2 };

struct sw_config {
    /*
     * The order is for start-up cost, not by key prefix: the numbers and flags first, then the
     * short strings, the list with a default, and the paths set in every process; then what is
     * usually left empty (the other lists and paths). Loading touches only the pages it writes
     * (the agent's struct is static, zero and page-aligned): two pages in the usual process.
     */
    /* agent.* */
    int sample_n_per_3_secs;      /* <= 0: sample all (default -1) */
    int span_limit_per_segment;   /* default 300 */
    int operation_name_threshold; /* default 150 */
    /* The Java agent's per-span limits, default 500, at least 1: a swagent span has at most one
       ref and one log, so any value holds without a check (0 is refused by config.c). */
    int trace_segment_ref_limit_per_span;
    int log_limit_per_span;
    bool keep_tracing;
    bool force_tls;
    /* collector.* (agent.force_reconnection_period and collector.grpc_channel_check_interval
       are refused with a log line) */
    int heartbeat_period;          /* seconds, default 30 */
    int cds_interval;              /* collector.get_agent_dynamic_config_interval: seconds,
                                      default 20; 0: the reporter does not ask OAP (CDS) */
    int get_profile_task_interval; /* seconds, default 20 (reporter: ProfileTask polls) */
    /* profile.* (docs/profiling.md) */
    bool profile_active;      /* default true: the reporter polls profile tasks */
    int profile_max_parallel; /* requests watched at once per process, default 5 */
    int profile_signal;       /* real-time signal of the sampling timers; 0 = SIGRTMAX - 3 */
    int profile_stack_bytes;  /* stack copied per sample for the reporter's unwinding, 4096 */
    int properties_report_period_factor; /* default 10 */
    int grpc_upstream_timeout;           /* seconds, default 30 */
    /* buffer.* */
    int channel_size; /* default 5 */
    int buffer_size;  /* default 300 */
    /* logging.* */
    int log_level;          /* enum sw_log_level (log.h), default INFO */
    long log_max_file_size; /* bytes, default 314572800 */
    /* correlation.* */
    int correlation_element_max_number; /* default 3 */
    int correlation_value_max_length;   /* default 128 */
    /* plugin.* */
    int peer_max_length;               /* default 200 */
    int http_params_length_threshold;  /* default 1024 */
    int http_headers_length_threshold; /* default 2048 */
    bool collect_http_params_entry;    /* plugin.tomcat.collect_http_params, default false */
    bool collect_http_params_exit;     /* plugin.httpclient.collect_http_params, default false */
    /* The protocol modules (issue 36), read once by each module's init() (proto.h). SQL keys
       with SkyWalking's names, shared by every SQL module (PostgreSQL, MySQL); a switch each. */
    int sql_body_max_length;       /* plugin.jdbc.sql_body_max_length: db.statement, default 2048 */
    bool trace_sql_parameters;     /* plugin.jdbc.trace_sql_parameters, default false */
    int sql_parameters_max_length; /* plugin.jdbc.sql_parameters_max_length, default 512 */
    bool trace_redis;              /* swagent.trace_redis: Redis exit spans, default true */
    bool trace_postgresql;         /* swagent.trace_postgresql, default true */
    bool trace_memcached;          /* swagent.trace_memcached, default true */
    bool trace_mysql;              /* swagent.trace_mysql: MySQL exit spans, default true */
    bool trace_fastcgi;            /* swagent.trace_fastcgi: FastCGI spans, default true */
    /* swagent.* (this agent's own keys) */
    bool runtime_dir_explicit; /* runtime_dir came from the file or the environment */
    int reporter_idle_exit;    /* seconds with no live traced process before exit; default 10 */
    bool grpc_gzip;            /* gzip messages to the collector, default true */
    bool grpc_batch;           /* segments as SegmentCollections on collectInSync (one
                                  message per batch), default true; false: collect stream */
    int reporter_nice;         /* the reporter's nice value (0-19, only raised), default 10 */
    bool reporter_sched_idle;  /* the reporter runs under SCHED_IDLE, default true */
    bool tsc_clock;            /* span times from the TSC where safe (clock.h), default true */
    /* Requests kept beyond the sampling quota (trace.c, "Keeping beyond the quota"). */
    bool keep_errors;      /* swagent.keep_errors: 5xx, failed exit, reset; default true */
    int keep_slow_ms;      /* swagent.keep_slow_ms: response begun this late; 0: off, 1000 */
    int keep_n_per_3_secs; /* swagent.keep_n_per_3_secs: at most this many kept, default 30 */
    /* meter.* (the reporter: per traced process CPU, memory, threads, swagent's counters) */
    bool meter_active;         /* meter.active, default true */
    int meter_report_interval; /* meter.report_interval, seconds, default 20 */
    /* swagent.log_capture (logcap.h, docs/logs.md): stdout/stderr lines as SkyWalking logs */
    int log_capture;            /* SW_LOGCAP_OFF (default), _ON (lines of traced requests), _ALL */
    long log_cap_bytes_per_sec; /* swagent.log_cap_bytes_per_sec: captured per process, 1 MiB */
    int log_max_line;           /* swagent.log_max_line: longer lines are cut, default 16384 */
    long ring_bytes;           /* derived: channel_size * buffer_size * 1 KiB, min 64 KiB */
    long ring_total_cap;       /* bytes of all rings of the user, default 256 MiB */
    long spool_max_bytes;      /* cap of the spool files, default 512 MiB */
    bool disabled;             /* swagent.enabled=false or SW_AGENT_DISABLE */
    unsigned paths_set;        /* SW_CFG_SET_* (derived values are filled without reading the
                                  path first: a read of an untouched page, then the write, is
                                  two page faults) */
    /* Where agent.sample_n_per_3_secs and agent.ignore_suffix came from (`swagent status`): the
       file's line number (> 0), or SW_CFG_SRC_* (config_file names the file). */
    int sample_src, ignore_suffix_src;
    /* Short strings. */
    char service_name[SW_CFG_NAME_MAX];  /* final name: `name|namespace|cluster` when set */
    char instance_name[SW_CFG_NAME_MAX]; /* default `<uuid-no-dashes>@<first ipv4>`; the
                                            agent fills it when it activates (agent.h) */
    char namespace_[SW_CFG_NAME_MAX];
    char cluster[SW_CFG_NAME_MAX];
    char log_file_name[SW_CFG_NAME_MAX];  /* default swagent.log */
    char backend_service[SW_CFG_STR_MAX]; /* collector.backend_service, default 127.0.0.1:11800 */
    char authentication[SW_CFG_STR_MAX];  /* agent.authentication */
    struct sw_cfg_list ignore_suffix;     /* without the leading '.' */
    /* Paths set in every process: runtime and log directory, the agent's own directory, the
       file read, the CA default derived from the agent's directory. */
    char self_dir[SW_CFG_PATH_MAX];    /* the self_dir given to sw_config_load, "" if none */
    char config_file[SW_CFG_PATH_MAX]; /* the file read, "" if none (informational) */
    char runtime_dir[SW_CFG_PATH_MAX]; /* rings, lock, default $XDG_RUNTIME_DIR/swagent,
                                          /dev/shm/swagent-<uid> or /tmp/swagent-<uid> (uid at
                                          start; see below) */
    char log_dir[SW_CFG_PATH_MAX];     /* default: the runtime directory */
    char ssl_trusted_ca_path[SW_CFG_PATH_MAX];
    /* Usually empty: lists without a default, paths only when configured. */
    struct sw_cfg_list include_http_headers;      /* lower-cased header names */
    struct sw_cfg_list propagation_exclude_ports; /* plugin.httpclient.* */
    struct sw_cfg_list correlation_auto_tag_keys; /* correlation.auto_tag_keys */
    /* plugin.jedis.operation_mapping_write / _read: Redis commands with cache.op write / read;
       when set, a list replaces the built-in one (proto_redis.c) */
    struct sw_cfg_list redis_op_write;
    struct sw_cfg_list redis_op_read;
    char reporter_path[SW_CFG_PATH_MAX]; /* "" unless configured: spawn.c then takes
                                            sw_config_default_reporter_path(self_dir) */
    char spool_dir[SW_CFG_PATH_MAX];     /* reporter spool; "" = <runtime_dir>/spool-<collector> */
    char ssl_key_path[SW_CFG_PATH_MAX];
    char ssl_cert_chain_path[SW_CFG_PATH_MAX];
};

/*
 * Bytes of ring per buffer slot (buffer.channel_size * buffer.buffer_size slots) when
 * swagent.ring_bytes is not set. A typical segment record is a few hundred bytes (an entry span
 * with url/method/status tags is ~260 bytes, entry + exit span ~420), so 1 KiB per slot leaves
 * room for the Java agent's 5 x 300 = 1,500 buffered segments with margin. The default is then
 * 5 * 300 * 1 KiB = 1,500 KiB, which the ring rounds up to a power of two: 2 MiB. All of it
 * is resident in the traced process once its first turn has filled it (ring.c maps it 64 KiB
 * ahead of the writers), so this constant is the agent's main contribution to the RSS of a
 * process that commits more than a few thousand segments.
 */
#define SW_RING_BYTES_PER_SLOT 1024L

#define SW_CONFIG_FILE_MAX (64 * 1024) /* bytes of a config file read; the rest is ignored */

/*
 * Fills `c` with defaults, then applies the file, then environment overrides.
 *
 * File: `path` if not NULL ("" means none: defaults and the environment only); else
 * $SW_AGENT_CONFIG if set and non-empty; else sw_config_find_file(self_dir): `<self_dir>/
 * agent.config`, then `<self_dir>/../etc/swagent/agent.config` (where `cmake --install` puts
 * it). The file read is kept in config_file; the reporter an agent starts is given that path
 * (spawn.c), so both read the same file.
 *
 * Precedence, highest first (the Java agent's rules, plus well-known variables without a file):
 *   1. SW_AGENT_DISABLE set to a true value (1, true, yes, on) disables the agent, always.
 *   2. A file line `key=...${ENV:default}...`: ENV if it is set (even to ""), else `default`
 *      (the FIRST ':' splits, so `${SW_AGENT_SAMPLE:-1}` defaults to "-1"; `${ENV}` with ENV
 *      unset gives ""). A literal `key=value` in the file is final.
 *   3. For a key with NO line in the file: its well-known environment variable (the table in
 *      agent.config and config.c, e.g. SW_AGENT_NAME, SW_AGENT_COLLECTOR_BACKEND_SERVICES,
 *      SW_AGENT_SAMPLE), if set.
 *   4. The built-in default.
 * Unknown keys and bad values (not an integer, out of range, too long, not a boolean or level)
 * are logged once each with file:line and the key; the default is kept. Derived values
 * (service name composition, instance name, runtime_dir, log_dir, ring_bytes) are computed
 * last; reporter_path stays "" unless set (its default costs three system calls, so spawn.c
 * finds it only when a reporter has to be started).
 *
 * Allocation-free and stdio-free (raw syscalls on a fixed SW_CONFIG_FILE_MAX buffer), so safe
 * in a constructor; may run before sw_log_open (log.c keeps early lines until the log opens).
 * Returns 0, or a negative errno when the file could not be read (-ENOENT if none was found;
 * everything else is then set from defaults and the environment).
 */
int sw_config_load(struct sw_config *c, const char *path, const char *self_dir);

/*
 * The agent's start: sw_config_load into a struct that is all zero (a static one): it is not
 * cleared first, so the pages it does not use are never touched; and instance_name is left
 * empty when not configured (its default costs a getrandom and three socket calls; the agent
 * calls sw_config_default_instance when it activates).
 */
int sw_config_load_zeroed(struct sw_config *c, const char *path, const char *self_dir);

/* Sets instance_name to its default, `<32 random hex>@<first non-loopback IPv4>`, when empty. */
void sw_config_default_instance(struct sw_config *c);

/* True when v (may be NULL) is a true value of a boolean key: true, 1, yes, on (any case). */
bool sw_config_bool_true(const char *v);

/* Fills `c` with defaults only (no environment, no file, no derived values but ring_bytes). */
void sw_config_defaults(struct sw_config *c);

/*
 * Sets `key` to the text v[0..len) in `c` with the file's rules (range, list limits), for a
 * value that comes from elsewhere (`who`: "OAP" for CDS). Returns 0, -ENOENT for a key the
 * file does not know, or -EINVAL for an empty or bad value (logged once, `c` unchanged).
 */
int sw_config_set(struct sw_config *c, const char *key, const char *v, size_t len, const char *who);

/* Works out a list's lens and first filters from its items (after the items were changed). */
void sw_cfg_list_index(struct sw_cfg_list *l);

/* sw_config_ignored_suffix() past its filters: suf[0..slen) against the items. */
bool sw_config_ignored_items(const struct sw_cfg_list *l, const char *suf, size_t slen);

/*
 * True when the suffix suf[0..slen) (the bytes after a path's last '.') is an ignore_suffix
 * entry. Inline: every request with a suffix asks, and the items' lengths and first bytes
 * (ASCII case folded) answer most of them ('.txt', '.php' against the default list) without
 * a call.
 */
static inline bool sw_cfg_list_ignored_suffix(const struct sw_cfg_list *l, const char *suf,
                                              size_t slen)
{
    if (slen == 0 || slen >= SW_CFG_ITEM_MAX || !(l->lens >> slen & 1u))
        return false; /* no item is that long */
    unsigned first = (unsigned char)suf[0] | 0x20u;
    if (!(l->first[first >> 6] >> (first & 63) & 1u))
        return false;
    return sw_config_ignored_items(l, suf, slen);
}

/* sw_cfg_list_ignored_suffix of the file's agent.ignore_suffix. */
static inline bool sw_config_ignored_suffix(const struct sw_config *c, const char *suf, size_t slen)
{
    return sw_cfg_list_ignored_suffix(&c->ignore_suffix, suf, slen);
}

/* True when `path` (no query string) ends in one of the entries of `l` (an ignore_suffix). */
bool sw_cfg_list_ignored_path(const struct sw_cfg_list *l, const char *path, size_t len);

/* True when `path` (no query string) ends in one of the ignore_suffix entries. */
bool sw_config_ignored_path(const struct sw_config *c, const char *path, size_t len);

/* True when `port` is listed in plugin.httpclient.propagation_exclude_ports. */
bool sw_config_port_excluded(const struct sw_config *c, int port);

/* True when header `name` (any case) is listed in plugin.http.include_http_headers. */
bool sw_config_header_included(const struct sw_config *c, const char *name, size_t len);

/*
 * The agent.config of a library (or program) in `dir`, the first that exists of
 * `<dir>/agent.config` (a private layout, the files side by side), `<dir>/../etc/swagent/
 * agent.config` (installed: <prefix>/lib or <prefix>/bin to <prefix>/etc/swagent) and, for a
 * multiarch library directory, the same under the prefix. Writes it to `out`; 0 or -ENOENT.
 */
int sw_config_find_file(char *out, size_t cap, const char *dir);

/* True when the reporter talks TLS to the collector: agent.force_tls, or the trusted CA file
   (agent.ssl_trusted_ca_path, default <library dir>/ca/ca.crt) is readable. One syscall. */
bool sw_config_uses_tls(const struct sw_config *c);

/*
 * The authentication and TLS settings of `c` as a number: 0 with neither a token nor TLS (the
 * usual case), else a hash (FNV-1a) of the token, the TLS choice and its files. Processes whose
 * numbers differ must not share a reporter (each call carries one token over one channel).
 */
uint32_t sw_config_settings_id(const struct sw_config *c);

/* `id` as 8 lower-case hex digits and a NUL (as in a reporter key). */
void sw_config_settings_hex(uint32_t id, char out[9]);

/*
 * The key a process's reporter is found by (its lock, status and spool names, the collector a
 * ring names): collector.backend_service when sw_config_settings_id is 0, else
 * `<backend_service>+<8 hex digits of the id>`, the backend cut so that the whole key fits
 * SW_CFG_KEY_MAX bytes (what a ring keeps). So there is one reporter per user, collector and
 * authentication/TLS settings: two processes with different tokens reporting to the same
 * collector get two reporters, each sending with its own processes' settings, never a mix.
 * Returns 0 or -ENAMETOOLONG.
 */
#define SW_CFG_KEY_MAX 128
int sw_config_reporter_key(const struct sw_config *c, char *out, size_t cap);

/* The same for the settings id `id` (a reporter started for processes whose settings id it
   was given: it serves their rings even when the file changed since). */
int sw_config_reporter_key_for(const struct sw_config *c, uint32_t id, char *out, size_t cap);

/*
 * Writes the default swagent-reporter path for a library loaded from `self_dir` to `out`:
 * the first executable of `<self_dir>/../bin/swagent-reporter` and
 * `<self_dir>/swagent-reporter`, else the bare name "swagent-reporter" (a PATH lookup).
 * Returns 0, or -ENAMETOOLONG (then `out` holds the bare name).
 */
int sw_config_default_reporter_path(char *out, size_t cap, const char *self_dir);

/*
 * Writes the default runtime directory of the CURRENT effective uid: $XDG_RUNTIME_DIR/swagent
 * when XDG_RUNTIME_DIR is an absolute path to a directory that uid owns and can write, else
 * /dev/shm/swagent-<euid> when /dev/shm is a tmpfs of at least 512 MiB (or unlimited), owned by
 * root or that uid, sticky when others can write it, else /tmp/swagent-<euid>. Returns 0 or
 * -ENAMETOOLONG. Memory, not a disk: a ring in a file on a disk filesystem is written back to
 * the disk as the application fills it (its whole size about every 30 s, per process), and
 * after each write-back the application's next store into a page faults into the filesystem.
 * /dev/shm is taken only when large, because a container's (64 MiB by default) would hold few
 * rings; the choice depends on the mount alone, so every process of a machine makes the same.
 *
 * Processes that change uid (nginx workers: forked by a root master, then setuid(nobody)):
 * the agent resolves the runtime directory again when it creates its ring, for the uid the
 * process has THEN (trace.c, sw_config_runtime_dir_for_uid): the default follows the uid; an
 * explicit swagent.runtime_dir that this uid cannot use (not owned by it, not 0700, a
 * symlink) is replaced by `<runtime_dir>/uid-<euid>` when that can be created or opened
 * (only inside a real directory owned by root or that uid, sticky when others can write it,
 * e.g. a 1777 directory), else, when the uid changed since start or the directory belongs to
 * another user (a CGI program started as nobody with root's environment), by the uid's
 * default directory. A symlink, a non-directory or a wrongly-moded directory of the uid's own
 * is refused (no ring, logged): a broken setting stays visible. The switch is logged once. A
 * reporter is started for that uid in that directory (one reporter per user and collector).
 */
int sw_config_default_runtime_dir(char *out, size_t cap);

/* True when `dir` lies in /dev/shm (memory), the default of most machines. */
bool sw_config_dir_in_shm(const char *dir);

/*
 * /tmp/swagent-<euid>, created 0700 if missing and checked like a runtime directory: where the
 * reporter's spool goes by default when the runtime directory is in /dev/shm (the spool, up to
 * swagent.spool_max_bytes, belongs on a disk). 0 or a negative errno.
 */
int sw_config_disk_dir(char *out, size_t cap);

/*
 * The runtime directory to use now (rules above; `allow_default`: the uid changed since start)
 * writes it to `out` and returns 0 when it exists (or was created 0700) and is usable by the
 * effective uid, else a negative errno (`out` then holds the last candidate tried). Makes syscalls
 * (mkdir, open, fstat): init or slow path only. *switched is set when the result differs from
 * c->runtime_dir.
 */
int sw_config_runtime_dir_for_uid(const struct sw_config *c, char *out, size_t cap,
                                  bool allow_default, bool *switched);

#endif /* SW_CONFIG_H */
