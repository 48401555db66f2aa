/*
 * config.c - agent.config (SkyWalking's `key=${ENV:default}` format) plus environment
 * overrides, into a const struct sw_config. Precedence rules are documented in config.h.
 *
 * Rules: runs at init only (constructor, reporter start), before application threads can see
 * the result, and is not reentrant (the file buffer is static). No allocation and no stdio:
 * the file is read with raw syscalls into a fixed buffer of SW_CONFIG_FILE_MAX bytes. A bad
 * file never stops the host: each problem is logged once with file:line and the key, and the
 * default is kept.
 */
#include "common.h"

#include "config.h"
#include "log.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#define VALUE_MAX 4096 /* bytes of one expanded value */

enum kind {
    K_STR,         /* string that must fit the field */
    K_INT,         /* int in [min, max] */
    K_LONG,        /* long in [min, max] */
    K_BOOL,        /* true/false, 1/0, yes/no, on/off */
    K_ENABLED,     /* boolean stored inverted into `disabled` */
    K_LEVEL,       /* log level name */
    K_LOGCAP,      /* swagent.log_capture: off, on (traced requests' lines) or all */
    K_LIST,        /* comma list */
    K_LIST_LOWER,  /* comma list, lower-cased (header names) */
    K_LIST_SUFFIX, /* comma list, leading '.' removed */
    K_LIST_PORTS,  /* comma list of ports 1..65535 */
    K_FILE_NAME,   /* string without '/' */
    K_IGNORED,     /* a Java key accepted for compatibility, no effect */
    K_REFUSED,     /* a Java key swagent does not do: each line is logged (refused_why) */
};

struct key {
    const char *key;
    const char *env; /* well-known environment variable (config.h rule 3), or NULL */
    enum kind kind;
    size_t off, size;
    long min, max;
};

#define F(field) offsetof(struct sw_config, field), sizeof(((struct sw_config *)0)->field)
#define NOF 0, 0

static const struct key keys[] = {
    {"agent.service_name", "SW_AGENT_NAME", K_STR, F(service_name), 0, 0},
    {"agent.namespace", "SW_AGENT_NAMESPACE", K_STR, F(namespace_), 0, 0},
    {"agent.cluster", "SW_AGENT_CLUSTER", K_STR, F(cluster), 0, 0},
    {"agent.instance_name", "SW_AGENT_INSTANCE_NAME", K_STR, F(instance_name), 0, 0},
    {"agent.sample_n_per_3_secs", "SW_AGENT_SAMPLE", K_INT, F(sample_n_per_3_secs), INT_MIN,
     1000000},
    {"agent.ignore_suffix", "SW_AGENT_IGNORE_SUFFIX", K_LIST_SUFFIX, F(ignore_suffix), 0, 0},
    {"agent.span_limit_per_segment", "SW_AGENT_SPAN_LIMIT", K_INT, F(span_limit_per_segment), 1,
     65535},
    /* At least 1: a swagent span carries at most one ref (the incoming sw8) and one log (its
       error), so every limit from 1 holds as the Java agent documents it; 0 (no ref, no log
       at all) is not supported and refused as out of range. */
    {"agent.trace_segment_ref_limit_per_span", "SW_TRACE_SEGMENT_LIMIT", K_INT,
     F(trace_segment_ref_limit_per_span), 1, 65535},
    {"agent.log_limit_per_span", "SW_LOG_LIMIT_PER_SPAN", K_INT, F(log_limit_per_span), 1, 65535},
    {"agent.operation_name_threshold", "SW_AGENT_OPERATION_NAME_THRESHOLD", K_INT,
     F(operation_name_threshold), 1, 65535},
    {"agent.keep_tracing", "SW_AGENT_KEEP_TRACING", K_BOOL, F(keep_tracing), 0, 0},
    {"agent.authentication", "SW_AGENT_AUTHENTICATION", K_STR, F(authentication), 0, 0},
    {"agent.force_tls", "SW_AGENT_FORCE_TLS", K_BOOL, F(force_tls), 0, 0},
    {"agent.ssl_trusted_ca_path", "SW_AGENT_SSL_TRUSTED_CA_PATH", K_STR, F(ssl_trusted_ca_path), 0,
     0},
    {"agent.ssl_key_path", "SW_AGENT_SSL_KEY_PATH", K_STR, F(ssl_key_path), 0, 0},
    {"agent.ssl_cert_chain_path", "SW_AGENT_SSL_CERT_CHAIN_PATH", K_STR, F(ssl_cert_chain_path), 0,
     0},
    {"agent.force_reconnection_period", NULL, K_REFUSED, NOF, 0, 0},
    {"collector.backend_service", "SW_AGENT_COLLECTOR_BACKEND_SERVICES", K_STR, F(backend_service),
     0, 0},
    {"collector.heartbeat_period", "SW_AGENT_COLLECTOR_HEARTBEAT_PERIOD", K_INT,
     F(heartbeat_period), 1, 86400},
    {"collector.properties_report_period_factor",
     "SW_AGENT_COLLECTOR_PROPERTIES_REPORT_PERIOD_FACTOR", K_INT,
     F(properties_report_period_factor), 1, 1000000},
    {"collector.grpc_channel_check_interval", NULL, K_REFUSED, NOF, 0, 0},
    {"collector.grpc_upstream_timeout", "SW_AGENT_COLLECTOR_GRPC_UPSTREAM_TIMEOUT", K_INT,
     F(grpc_upstream_timeout), 1, 86400},
    {"collector.get_agent_dynamic_config_interval",
     "SW_AGENT_COLLECTOR_GET_AGENT_DYNAMIC_CONFIG_INTERVAL", K_INT, F(cds_interval), 0, 86400},
    {"collector.get_profile_task_interval", "SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL", K_INT,
     F(get_profile_task_interval), 1, 86400},
    {"profile.active", "SW_AGENT_PROFILE_ACTIVE", K_BOOL, F(profile_active), 0, 0},
    {"profile.max_parallel", "SW_AGENT_PROFILE_MAX_PARALLEL", K_INT, F(profile_max_parallel), 1,
     16},
    {"profile.signal", "SW_AGENT_PROFILE_SIGNAL", K_INT, F(profile_signal), 0, 64},
    {"profile.stack_bytes", "SW_AGENT_PROFILE_STACK_BYTES", K_INT, F(profile_stack_bytes), 0, 8192},
    {"buffer.channel_size", "SW_BUFFER_CHANNEL_SIZE", K_INT, F(channel_size), 1, 1024},
    {"buffer.buffer_size", "SW_BUFFER_BUFFER_SIZE", K_INT, F(buffer_size), 1, 1000000},
    {"logging.level", "SW_LOGGING_LEVEL", K_LEVEL, F(log_level), 0, 0},
    {"logging.file_name", "SW_LOGGING_FILE_NAME", K_FILE_NAME, F(log_file_name), 0, 0},
    {"logging.dir", "SW_LOGGING_DIR", K_STR, F(log_dir), 0, 0},
    {"logging.max_file_size", "SW_LOGGING_MAX_FILE_SIZE", K_LONG, F(log_max_file_size), 0,
     LONG_MAX},
    {"logging.output", NULL, K_IGNORED, NOF, 0, 0},
    {"logging.resolver", NULL, K_IGNORED, NOF, 0, 0},
    {"logging.pattern", NULL, K_IGNORED, NOF, 0, 0},
    {"logging.max_history_files", NULL, K_IGNORED, NOF, 0, 0},
    {"correlation.element_max_number", "SW_CORRELATION_ELEMENT_MAX_NUMBER", K_INT,
     F(correlation_element_max_number), 0, 64},
    {"correlation.value_max_length", "SW_CORRELATION_VALUE_MAX_LENGTH", K_INT,
     F(correlation_value_max_length), 0, 1024},
    {"correlation.auto_tag_keys", "SW_CORRELATION_AUTO_TAG_KEYS", K_LIST,
     F(correlation_auto_tag_keys), 0, 0},
    {"plugin.peer_max_length", "SW_PLUGIN_PEER_MAX_LENGTH", K_INT, F(peer_max_length), 1, 65535},
    {"plugin.http.http_params_length_threshold", "SW_PLUGIN_HTTP_HTTP_PARAMS_LENGTH_THRESHOLD",
     K_INT, F(http_params_length_threshold), 0, 65535},
    {"plugin.http.http_headers_length_threshold", "SW_PLUGIN_HTTP_HTTP_HEADERS_LENGTH_THRESHOLD",
     K_INT, F(http_headers_length_threshold), 0, 65535},
    {"plugin.http.include_http_headers", "SW_PLUGIN_HTTP_INCLUDE_HTTP_HEADERS", K_LIST_LOWER,
     F(include_http_headers), 0, 0},
    {"plugin.tomcat.collect_http_params", "SW_PLUGIN_TOMCAT_COLLECT_HTTP_PARAMS", K_BOOL,
     F(collect_http_params_entry), 0, 0},
    {"plugin.httpclient.collect_http_params", "SW_PLUGIN_HTTPCLIENT_COLLECT_HTTP_PARAMS", K_BOOL,
     F(collect_http_params_exit), 0, 0},
    {"plugin.jdbc.sql_body_max_length", "SW_PLUGIN_JDBC_SQL_BODY_MAX_LENGTH", K_INT,
     F(sql_body_max_length), 1, 2048},
    {"plugin.jdbc.trace_sql_parameters", "SW_JDBC_TRACE_SQL_PARAMETERS", K_BOOL,
     F(trace_sql_parameters), 0, 0},
    {"plugin.jdbc.sql_parameters_max_length", "SW_PLUGIN_JDBC_SQL_PARAMETERS_MAX_LENGTH", K_INT,
     F(sql_parameters_max_length), 1, 512},
    {"plugin.jedis.operation_mapping_write", "SW_PLUGIN_JEDIS_OPERATION_MAPPING_WRITE", K_LIST,
     F(redis_op_write), 0, 0},
    {"plugin.jedis.operation_mapping_read", "SW_PLUGIN_JEDIS_OPERATION_MAPPING_READ", K_LIST,
     F(redis_op_read), 0, 0},
    {"swagent.trace_redis", "SW_AGENT_TRACE_REDIS", K_BOOL, F(trace_redis), 0, 0},
    {"swagent.trace_postgresql", "SW_AGENT_TRACE_POSTGRESQL", K_BOOL, F(trace_postgresql), 0, 0},
    {"swagent.trace_memcached", "SW_AGENT_TRACE_MEMCACHED", K_BOOL, F(trace_memcached), 0, 0},
    {"plugin.httpclient.propagation_exclude_ports",
     "SW_PLUGIN_HTTPCLIENT_PROPAGATION_EXCLUDE_PORTS", K_LIST_PORTS, F(propagation_exclude_ports),
     0, 0},
    {"swagent.enabled", "SW_AGENT_ENABLED", K_ENABLED, F(disabled), 0, 0},
    {"swagent.runtime_dir", "SW_AGENT_RUNTIME_DIR", K_STR, F(runtime_dir), 0, 0},
    {"swagent.reporter_path", "SW_AGENT_REPORTER_PATH", K_STR, F(reporter_path), 0, 0},
    {"swagent.reporter_idle_exit", "SW_AGENT_REPORTER_IDLE_EXIT", K_INT, F(reporter_idle_exit), 0,
     86400},
    {"swagent.grpc_gzip", "SW_AGENT_GRPC_GZIP", K_BOOL, F(grpc_gzip), 0, 0},
    {"swagent.grpc_batch", "SW_AGENT_GRPC_BATCH", K_BOOL, F(grpc_batch), 0, 0},
    {"swagent.reporter_nice", "SW_AGENT_REPORTER_NICE", K_INT, F(reporter_nice), 0, 19},
    {"swagent.reporter_sched_idle", "SW_AGENT_REPORTER_SCHED_IDLE", K_BOOL, F(reporter_sched_idle),
     0, 0},
    {"swagent.tsc_clock", "SW_AGENT_TSC_CLOCK", K_BOOL, F(tsc_clock), 0, 0},
    {"swagent.keep_errors", "SW_AGENT_KEEP_ERRORS", K_BOOL, F(keep_errors), 0, 0},
    {"swagent.keep_slow_ms", "SW_AGENT_KEEP_SLOW_MS", K_INT, F(keep_slow_ms), 0, 86400000},
    {"swagent.keep_n_per_3_secs", "SW_AGENT_KEEP_N_PER_3_SECS", K_INT, F(keep_n_per_3_secs), 1,
     1000000},
    {"meter.active", "SW_METER_ACTIVE", K_BOOL, F(meter_active), 0, 0},
    {"meter.report_interval", "SW_METER_REPORT_INTERVAL", K_INT, F(meter_report_interval), 1,
     86400},
    {"swagent.ring_bytes", "SW_AGENT_RING_BYTES", K_LONG, F(ring_bytes), 0, 1L << 30},
    {"swagent.ring_total_cap", "SW_AGENT_RING_TOTAL_CAP", K_LONG, F(ring_total_cap), 64L * 1024,
     1L << 40},
    {"swagent.spool_dir", "SW_AGENT_SPOOL_DIR", K_STR, F(spool_dir), 0, 0},
    {"swagent.spool_max_bytes", "SW_AGENT_SPOOL_MAX_BYTES", K_LONG, F(spool_max_bytes), 4096,
     1L << 50},
    /* MySQL / MariaDB and FastCGI (issue 36; docs/mysql-fastcgi.md); their SQL settings are the
       plugin.jdbc.* keys above, shared by every SQL module (the Java agent's older per-driver
       names are refused with a line saying so). */
    {"plugin.mysql.sql_body_max_length", NULL, K_REFUSED, NOF, 0, 0},
    {"plugin.mysql.trace_sql_parameters", NULL, K_REFUSED, NOF, 0, 0},
    {"plugin.mysql.sql_parameters_max_length", NULL, K_REFUSED, NOF, 0, 0},
    {"swagent.trace_mysql", "SW_AGENT_TRACE_MYSQL", K_BOOL, F(trace_mysql), 0, 0},
    {"swagent.trace_fastcgi", "SW_AGENT_TRACE_FASTCGI", K_BOOL, F(trace_fastcgi), 0, 0},
    /* Logs (issue 38 item 5; docs/logs.md) */
    {"swagent.log_capture", "SW_AGENT_LOG_CAPTURE", K_LOGCAP, F(log_capture), 0, 0},
    {"swagent.log_cap_bytes_per_sec", "SW_AGENT_LOG_CAP_BYTES_PER_SEC", K_LONG,
     F(log_cap_bytes_per_sec), 0, 1L << 40},
    {"swagent.log_max_line", "SW_AGENT_LOG_MAX_LINE", K_INT, F(log_max_line), 64, 1 << 20},
};

#define NKEYS SW_ARRAY_LEN(keys)

/*
 * Why a K_REFUSED key does nothing here. Keys of the Java agent for what swagent does another
 * way, or not yet: a line with one is logged (file:line) rather than silently accepted.
 */
static const struct {
    const char *key, *why;
} refused_why[] = {
    {"agent.force_reconnection_period",
     "the reporter reconnects by itself: at once after a failure, then backing off from 100 ms "
     "to 10 s, moving on through collector.backend_service (docs/reliability.md)"},
    {"collector.grpc_channel_check_interval",
     "the reporter does not poll its channel: it reconnects at once after a failure, then backs "
     "off from 100 ms to 10 s (docs/reliability.md)"},
    {"plugin.mysql.sql_body_max_length",
     "every SQL module (MySQL, PostgreSQL) uses plugin.jdbc.sql_body_max_length, as the Java "
     "agent does since 8.x (docs/configuration.md, \"Protocol modules\")"},
    {"plugin.mysql.trace_sql_parameters",
     "every SQL module (MySQL, PostgreSQL) uses plugin.jdbc.trace_sql_parameters, as the Java "
     "agent does since 8.x (docs/configuration.md, \"Protocol modules\")"},
    {"plugin.mysql.sql_parameters_max_length",
     "every SQL module (MySQL, PostgreSQL) uses plugin.jdbc.sql_parameters_max_length, as the "
     "Java agent does since 8.x (docs/configuration.md, \"Protocol modules\")"},
};
_Static_assert(NKEYS <= 128, "fuzz_config passes a seen[128] array");

#define RING_MIN (64L * 1024)
#define RING_MAX (64L * 1024 * 1024)

static char file_buf[SW_CONFIG_FILE_MAX];

/* ---- small string helpers (no libc allocation, no locale) ---- */

static bool is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n' || ch == '\v' || ch == '\f';
}

static char lower(char ch)
{
    return ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
}

static bool ieq(const char *a, size_t alen, const char *b)
{
    size_t i;
    for (i = 0; i < alen && b[i]; i++)
        if (lower(a[i]) != lower(b[i]))
            return false;
    return i == alen && b[i] == '\0';
}

static void trim(const char **s, size_t *len)
{
    while (*len > 0 && is_space(**s)) {
        (*s)++;
        (*len)--;
    }
    while (*len > 0 && is_space((*s)[*len - 1]))
        (*len)--;
}

/* Copies `s` into `out` as a NUL-terminated string; false if it does not fit. */
static bool copy_str(char *out, size_t cap, const char *s, size_t len)
{
    if (len >= cap)
        return false;
    memcpy(out, s, len);
    out[len] = '\0';
    return true;
}

/* Appends strings to a bounded buffer; `ok` turns false on overflow. */
struct sbuf {
    char *p;
    size_t len, cap;
    bool ok;
};

static void sb_put(struct sbuf *b, const char *s, size_t n)
{
    if (!b->ok || n >= b->cap - b->len) {
        b->ok = false;
        return;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_str(struct sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

static void sb_uint(struct sbuf *b, unsigned long v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[sizeof(tmp) - 1 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    sb_put(b, tmp + sizeof(tmp) - n, (size_t)n);
}

static bool parse_long(const char *s, size_t len, long *out)
{
    bool neg = false;
    size_t i = 0;
    unsigned long v = 0;

    if (len > 0 && (s[0] == '-' || s[0] == '+')) {
        neg = s[0] == '-';
        i = 1;
    }
    if (i == len)
        return false;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        unsigned long d = (unsigned long)(s[i] - '0');
        if (v > ((unsigned long)LONG_MAX + 1 - d) / 10)
            return false;
        v = v * 10 + d;
    }
    if (!neg && v > (unsigned long)LONG_MAX)
        return false;
    *out = neg ? (long)(0 - v) : (long)v;
    return true;
}

static int parse_bool(const char *s, size_t len)
{
    if (ieq(s, len, "true") || ieq(s, len, "1") || ieq(s, len, "yes") || ieq(s, len, "on"))
        return 1;
    if (ieq(s, len, "false") || ieq(s, len, "0") || ieq(s, len, "no") || ieq(s, len, "off"))
        return 0;
    return -1;
}

/* ---- applying one value ---- */

/* Where a value came from, for the one log line a problem gets. */
struct origin {
    const char *file; /* NULL: the environment */
    int line;
    const char *env;
};

static bool g_reported; /* report() ran (sw_config_set, note_src) */
static bool g_env_used; /* expand() took a variable from the environment */

static void report(const struct origin *o, const char *key, const char *what, const char *val,
                   size_t vlen)
{
    g_reported = true;
    if (vlen > 200)
        vlen = 200;
    if (o->file && o->line == 0) /* sw_config_set: not a file line */
        sw_log(SW_LOG_WARN, "config from %s: %s %s: \"%.*s\" (ignored)", o->file, what, key,
               (int)vlen, val);
    else if (o->file)
        sw_log(SW_LOG_WARN, "config %s:%d: %s %s: \"%.*s\" (default kept)", o->file, o->line, what,
               key, (int)vlen, val);
    else
        sw_log(SW_LOG_WARN, "config: environment %s: %s %s: \"%.*s\" (default kept)", o->env, what,
               key, (int)vlen, val);
}

/* Parses a comma list into `tmp`; returns false (with one log line) on a bad item. */
static bool parse_list(const struct key *k, const char *v, size_t len, struct sw_cfg_list *tmp,
                       const struct origin *o)
{
    size_t i = 0;

    memset(tmp, 0, sizeof(*tmp));
    while (i < len) {
        const char *item = v + i;
        size_t n = 0;
        while (i < len && v[i] != ',') {
            i++;
            n++;
        }
        i++;
        trim(&item, &n);
        if (k->kind == K_LIST_SUFFIX && n > 0 && item[0] == '.') {
            item++;
            n--;
        }
        if (n == 0)
            continue;
        if (tmp->n == SW_CFG_LIST_MAX) {
            report(o, k->key, "too many entries (max 32) in", v, len);
            return false;
        }
        if (n >= SW_CFG_ITEM_MAX) {
            report(o, k->key, "an entry is too long (max 31 bytes) in", v, len);
            return false;
        }
        if (k->kind == K_LIST_PORTS) {
            long port;
            if (!parse_long(item, n, &port) || port < 1 || port > 65535) {
                report(o, k->key, "bad port in", v, len);
                return false;
            }
        }
        char *dst = tmp->item[tmp->n++];
        for (size_t j = 0; j < n; j++)
            dst[j] = k->kind == K_LIST_LOWER ? lower(item[j]) : item[j];
        dst[n] = '\0';
    }
    sw_cfg_list_index(tmp);
    return true;
}

void sw_cfg_list_index(struct sw_cfg_list *l)
{
    l->lens = 0;
    memset(l->first, 0, sizeof(l->first));
    for (int i = 0; i < l->n && i < SW_CFG_LIST_MAX; i++) {
        size_t n = strnlen(l->item[i], SW_CFG_ITEM_MAX);
        unsigned first = (unsigned char)l->item[i][0] | 0x20u;
        if (n < 32)
            l->lens |= 1u << n;
        l->first[first >> 6] |= 1ull << (first & 63);
    }
}

/* Applies the (expanded, trimmed) value `v` of key `k` to `c`. */
/* Keeps paths_set in step with the paths whose defaults derive() fills. */
static void mark_path(struct sw_config *c, size_t off, bool set)
{
    unsigned bit = off == offsetof(struct sw_config, runtime_dir)           ? SW_CFG_SET_RUNTIME_DIR
                   : off == offsetof(struct sw_config, log_dir)             ? SW_CFG_SET_LOG_DIR
                   : off == offsetof(struct sw_config, ssl_trusted_ca_path) ? SW_CFG_SET_CA_PATH
                                                                            : 0;
    if (bit)
        c->paths_set = set ? c->paths_set | bit : c->paths_set & ~bit;
}

/* swagent.log_capture: off/false/0, on/true/1 (lines of traced requests), all. -1 if neither. */
static int logcap_parse(const char *v, size_t len)
{
    static const struct {
        const char *s;
        int v;
    } names[] = {{"off", SW_LOGCAP_OFF}, {"false", SW_LOGCAP_OFF}, {"0", SW_LOGCAP_OFF},
                 {"no", SW_LOGCAP_OFF},  {"on", SW_LOGCAP_ON},     {"true", SW_LOGCAP_ON},
                 {"1", SW_LOGCAP_ON},    {"yes", SW_LOGCAP_ON},    {"all", SW_LOGCAP_ALL}};
    for (size_t i = 0; i < SW_ARRAY_LEN(names); i++)
        if (strlen(names[i].s) == len && strncasecmp(names[i].s, v, len) == 0)
            return names[i].v;
    return -1;
}

static void apply(struct sw_config *c, const struct key *k, const char *v, size_t len,
                  const struct origin *o)
{
    char *field = (char *)c + k->off;
    long num;
    int b;

    switch (k->kind) {
    case K_IGNORED:
        return;
    case K_REFUSED:
        for (size_t i = 0; i < SW_ARRAY_LEN(refused_why); i++)
            if (strcmp(refused_why[i].key, k->key) == 0)
                sw_log(SW_LOG_WARN,
                       "config %s:%d: %s is not supported by swagent and is ignored: %s",
                       o->file ? o->file : o->env, o->line, k->key, refused_why[i].why);
        return;
    case K_FILE_NAME:
        if (len == 0 || memchr(v, '/', len) != NULL) {
            report(o, k->key, "bad file name for", v, len);
            return;
        }
        /* fall through */
    case K_STR:
        if (len >= k->size) {
            report(o, k->key, "value too long for", v, len);
            return;
        }
        copy_str(field, k->size, v, len);
        mark_path(c, k->off, len > 0);
        return;
    default:
        break;
    }
    if (len == 0)
        return; /* `key=` or an empty placeholder: the default stays (not an error) */
    switch (k->kind) {
    case K_INT:
    case K_LONG:
        if (!parse_long(v, len, &num)) {
            report(o, k->key, "not an integer for", v, len);
            return;
        }
        if (num < k->min || num > k->max) {
            report(o, k->key, "out of range for", v, len);
            return;
        }
        if (k->kind == K_INT)
            *(int *)(void *)field = (int)num;
        else
            *(long *)(void *)field = num;
        return;
    case K_BOOL:
    case K_ENABLED:
        b = parse_bool(v, len);
        if (b < 0) {
            report(o, k->key, "not a boolean for", v, len);
            return;
        }
        *(bool *)(void *)field = k->kind == K_ENABLED ? !b : b;
        return;
    case K_LEVEL:
        b = sw_log_level_parse(v, len);
        if (b < 0) {
            report(o, k->key, "not a log level for", v, len);
            return;
        }
        *(int *)(void *)field = b;
        return;
    case K_LOGCAP:
        b = logcap_parse(v, len);
        if (b < 0) {
            report(o, k->key, "not off, on or all for", v, len);
            return;
        }
        *(int *)(void *)field = b;
        return;
    case K_LIST:
    case K_LIST_LOWER:
    case K_LIST_SUFFIX:
    case K_LIST_PORTS: {
        struct sw_cfg_list tmp;
        if (parse_list(k, v, len, &tmp, o))
            memcpy(field, &tmp, sizeof(tmp));
        return;
    }
    default:
        return;
    }
}

/* apply(), and for the keys `swagent status` explains, where the value came from. */
static void apply_noted(struct sw_config *c, const struct key *k, const char *v, size_t len,
                        const struct origin *o, int src)
{
    g_reported = false;
    apply(c, k, v, len, o);
    if (g_reported || len == 0)
        return;
    if (k->off == offsetof(struct sw_config, sample_n_per_3_secs))
        c->sample_src = src;
    else if (k->off == offsetof(struct sw_config, ignore_suffix))
        c->ignore_suffix_src = src;
}

static const struct key *find_key(const char *s, size_t len)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (strlen(keys[i].key) == len && memcmp(keys[i].key, s, len) == 0)
            return &keys[i];
    return NULL;
}

int sw_config_set(struct sw_config *c, const char *key, const char *v, size_t len, const char *who)
{
    const struct key *k = find_key(key, strlen(key));
    if (!k || k->kind == K_IGNORED || k->kind == K_REFUSED)
        return -ENOENT;
    struct origin o = {who, 0, NULL};
    trim(&v, &len);
    if (len == 0 || memchr(v, '\0', len)) {
        report(&o, k->key, "empty or NUL in value for", v, strnlen(v, len));
        return -EINVAL;
    }
    g_reported = false;
    apply(c, k, v, len, &o);
    return g_reported ? -EINVAL : 0;
}

/*
 * The environment's SW_* variables, collected in one pass over environ while a file is loaded:
 * the defaults name a ${SW_...} variable for almost every key, and getenv would scan the whole
 * environment for each. Only during sw_config_load (single-threaded, at start); other names
 * and other callers use getenv. The first match counts, as with getenv.
 */
extern char **environ;
static struct {
    bool on;
    int n;
    const char *e[64];
} envc SW_INIT_DATA;

static void envc_start(void)
{
    envc.on = true;
    envc.n = 0;
    for (char **p = environ; p && *p; p++) {
        if ((*p)[0] != 'S' || (*p)[1] != 'W' || (*p)[2] != '_')
            continue;
        if (envc.n == (int)SW_ARRAY_LEN(envc.e)) {
            envc.on = false; /* too many: getenv for all */
            return;
        }
        envc.e[envc.n++] = *p;
    }
}

static const char *env_get(const char *name, size_t nlen)
{
    if (!envc.on || nlen < 3 || memcmp(name, "SW_", 3) != 0)
        return getenv(name);
    for (int i = 0; i < envc.n; i++)
        if (strncmp(envc.e[i], name, nlen) == 0 && envc.e[i][nlen] == '=')
            return envc.e[i] + nlen + 1;
    return NULL;
}

/*
 * Expands every `${NAME:default}` in `v`: NAME from the environment if set (even to ""), else
 * the default (after the FIRST ':'; "" if there is no ':'). No nesting: the default ends at
 * the first '}'. An unterminated `${` is copied as is. Returns false if the result is too long.
 */
static bool expand(const char *v, size_t len, char *out, size_t cap, size_t *out_len)
{
    struct sbuf b = {out, 0, cap, true};
    size_t i = 0;

    out[0] = '\0';
    while (i < len) {
        if (v[i] == '$' && i + 1 < len && v[i + 1] == '{') {
            const char *end = memchr(v + i + 2, '}', len - i - 2);
            if (end != NULL) {
                const char *name = v + i + 2;
                size_t inner = (size_t)(end - name);
                const char *colon = memchr(name, ':', inner);
                size_t nlen = colon ? (size_t)(colon - name) : inner;
                char ename[256];
                const char *env = NULL;
                if (nlen > 0 && copy_str(ename, sizeof(ename), name, nlen))
                    env = env_get(ename, nlen);
                if (env != NULL) {
                    sb_str(&b, env);
                    g_env_used = true;
                } else if (colon != NULL)
                    sb_put(&b, colon + 1, (size_t)(end - colon - 1));
                i = (size_t)(end - v) + 1;
                continue;
            }
        }
        sb_put(&b, v + i, 1);
        i++;
    }
    *out_len = b.len;
    return b.ok;
}

/*
 * Parses a whole file image. `seen[i]` is set for each known key with a line. Under SW_TESTING
 * it is reachable from the tests and fuzz_config.
 */
SW_STATIC void sw_config_parse_buffer(struct sw_config *c, const char *buf, size_t len,
                                      const char *fname, bool *seen)
{
    size_t pos = 0;
    int lineno = 0;
    char val[VALUE_MAX];

    while (pos < len) {
        const char *line = buf + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - line) : len - pos;
        pos += n + 1;
        lineno++;
        trim(&line, &n);
        if (n == 0 || line[0] == '#' || line[0] == '!')
            continue;
        struct origin o = {fname, lineno, NULL};
        if (memchr(line, '\0', n) != NULL) {
            report(&o, "(line)", "NUL byte in", line, strnlen(line, n));
            continue;
        }
        const char *eq = memchr(line, '=', n);
        if (eq == NULL) {
            report(&o, "(line)", "no '=' in", line, n);
            continue;
        }
        const char *key = line;
        size_t klen = (size_t)(eq - line);
        const char *v = eq + 1;
        size_t vlen = n - klen - 1;
        trim(&key, &klen);
        trim(&v, &vlen);
        const struct key *k = find_key(key, klen);
        if (k == NULL) {
            sw_log(SW_LOG_WARN, "config %s:%d: unknown key %.*s (ignored)", fname, lineno,
                   (int)(klen > 200 ? 200 : klen), key);
            continue;
        }
        if (seen)
            seen[k - keys] = true;
        size_t xlen;
        g_env_used = false;
        if (!expand(v, vlen, val, sizeof(val), &xlen)) {
            report(&o, k->key, "value too long for", v, vlen);
            continue;
        }
        const char *x = val;
        trim(&x, &xlen);
        apply_noted(c, k, x, xlen, &o, g_env_used ? SW_CFG_SRC_ENV_SUB : lineno);
    }
}

/* Reads `path` into file_buf; returns the bytes read or a negative errno. */
static long read_file(const char *path)
{
    long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    size_t got = 0;

    if (fd < 0)
        return -errno;
    while (got < sizeof(file_buf)) {
        long n = syscall(SYS_read, (int)fd, file_buf + got, sizeof(file_buf) - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            syscall(SYS_close, (int)fd);
            return -e;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    if (got == sizeof(file_buf)) {
        char extra;
        if (syscall(SYS_read, (int)fd, &extra, 1) == 1) {
            sw_log(SW_LOG_WARN, "config %s: longer than %d bytes, the rest is ignored", path,
                   SW_CONFIG_FILE_MAX);
            while (got > 0 && file_buf[got - 1] != '\n')
                got--; /* drop the cut line */
        }
    }
    syscall(SYS_close, (int)fd);
    return (long)got;
}

static bool file_exists(const char *path)
{
    struct stat st;
    return syscall(SYS_newfstatat, AT_FDCWD, path, &st, 0) == 0 && S_ISREG(st.st_mode);
}

static bool join(char *out, size_t cap, const char *a, const char *b)
{
    struct sbuf sb = {out, 0, cap, true};
    out[0] = '\0';
    sb_str(&sb, a);
    sb_str(&sb, b);
    return sb.ok;
}

/* ---- defaults and derived values ---- */

static void set_list(struct sw_cfg_list *l, const char *csv)
{
    static const struct key k = {"", NULL, K_LIST_SUFFIX, 0, 0, 0, 0};
    struct origin o = {"(built-in)", 0, NULL};
    parse_list(&k, csv, strlen(csv), l, &o);
}

/* The defaults into an all-zero struct. */
static void defaults_fill(struct sw_config *c)
{
    copy_str(c->service_name, sizeof(c->service_name), "Your_ApplicationName", 20);
    c->sample_n_per_3_secs = -1;
    set_list(&c->ignore_suffix, ".jpg,.jpeg,.js,.css,.png,.bmp,.gif,.ico,.mp3,.mp4,.html,.svg");
    c->span_limit_per_segment = 300;
    c->trace_segment_ref_limit_per_span = 500;
    c->log_limit_per_span = 500;
    c->operation_name_threshold = 150;
    c->keep_tracing = false;
    copy_str(c->backend_service, sizeof(c->backend_service), "127.0.0.1:11800", 15);
    c->heartbeat_period = 30;
    c->cds_interval = 20;
    c->get_profile_task_interval = 20;
    c->profile_active = true;
    c->profile_max_parallel = 5;
    c->profile_signal = 0;
    c->profile_stack_bytes = 4096;
    c->properties_report_period_factor = 10;
    c->grpc_upstream_timeout = 30;
    c->channel_size = 5;
    c->buffer_size = 300;
    c->log_level = SW_LOG_INFO;
    copy_str(c->log_file_name, sizeof(c->log_file_name), "swagent.log", 11);
    c->log_max_file_size = 314572800;
    c->correlation_element_max_number = 3;
    c->correlation_value_max_length = 128;
    c->peer_max_length = 200;
    c->http_params_length_threshold = 1024;
    c->http_headers_length_threshold = 2048;
    c->sql_body_max_length = 2048;
    c->sql_parameters_max_length = 512;
    c->trace_redis = c->trace_postgresql = c->trace_memcached = true;
    c->reporter_idle_exit = 10;
    c->grpc_gzip = true;
    c->grpc_batch = true;
    c->reporter_nice = 10;
    c->reporter_sched_idle = true;
    c->tsc_clock = true;
    c->keep_errors = true;
    c->keep_slow_ms = 1000;
    c->keep_n_per_3_secs = 30;
    c->meter_active = true;
    c->meter_report_interval = 20;
    c->log_capture = SW_LOGCAP_OFF;
    c->log_cap_bytes_per_sec = 1L << 20;
    c->log_max_line = 16384;
    c->ring_bytes = 5L * 300 * SW_RING_BYTES_PER_SLOT;
    c->ring_total_cap = 256L * 1024 * 1024;
    c->spool_max_bytes = 512L * 1024 * 1024;
    c->trace_mysql = c->trace_fastcgi = true;
    c->disabled = false;
}

void sw_config_defaults(struct sw_config *c)
{
    memset(c, 0, sizeof(*c));
    defaults_fill(c);
}

/*
 * /dev/shm when it is a writable tmpfs of at least SW_SHM_MIN_BYTES (or unlimited), a directory
 * owned by root or `euid`, sticky and writable by all (1777) or owned by `euid`. A property of
 * the mount, not of its free space, so every process of the machine makes the same choice. Two
 * syscalls, made at start-up of every process without XDG_RUNTIME_DIR.
 */
#define SW_SHM_DIR "/dev/shm"
#define SW_SHM_MIN_BYTES (512ull << 20)
static bool shm_usable(uid_t euid)
{
    struct statfs sf;
    struct stat st;

    if (syscall(SYS_statfs, SW_SHM_DIR, &sf) != 0 || sf.f_type != TMPFS_MAGIC ||
        (sf.f_flags & ST_RDONLY) ||
        (sf.f_blocks != 0 &&
         (unsigned long long)sf.f_blocks * (unsigned long long)sf.f_bsize < SW_SHM_MIN_BYTES))
        return false;
    if (syscall(SYS_newfstatat, AT_FDCWD, SW_SHM_DIR, &st, 0) != 0 || !S_ISDIR(st.st_mode))
        return false;
    if (st.st_uid == euid)
        return (st.st_mode & 0700) == 0700 && (!(st.st_mode & 0022) || (st.st_mode & S_ISVTX));
    return st.st_uid == 0 && (st.st_mode & 01777) == 01777;
}

/* `<root>/swagent-<euid>` */
static int uid_dir(char *out, size_t cap, const char *root, uid_t euid)
{
    struct sbuf b = {out, 0, cap, true};

    out[0] = '\0';
    sb_str(&b, root);
    sb_str(&b, "/swagent-");
    sb_uint(&b, (unsigned long)euid);
    return b.ok ? 0 : -ENAMETOOLONG;
}

int sw_config_default_runtime_dir(char *out, size_t cap)
{
    struct sbuf b = {out, 0, cap, true};
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    uid_t euid = (uid_t)syscall(SYS_geteuid);

    out[0] = '\0';
    if (xdg != NULL && xdg[0] == '/' && syscall(SYS_newfstatat, AT_FDCWD, xdg, &st, 0) == 0 &&
        S_ISDIR(st.st_mode) && st.st_uid == euid &&
        syscall(SYS_faccessat, AT_FDCWD, xdg, W_OK | X_OK) == 0) {
        sb_str(&b, xdg);
        sb_str(&b, "/swagent");
        if (b.ok)
            return 0;
    }
    return uid_dir(out, cap, shm_usable(euid) ? SW_SHM_DIR : "/tmp", euid);
}

bool sw_config_dir_in_shm(const char *dir)
{
    return strncmp(dir, SW_SHM_DIR "/", sizeof(SW_SHM_DIR)) == 0;
}

/*
 * True when `dir` is a runtime directory of the effective uid, creating it (one level, 0700)
 * when missing: a real directory (not a symlink), owned by the euid, mode exactly 0700. The
 * same rules as sw_ring_dir_open (ring.c), repeated here so config.c links on its own.
 */
static bool rundir_usable(const char *dir)
{
    int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    long fd = syscall(SYS_openat, AT_FDCWD, dir, flags);
    if (fd < 0 && errno == ENOENT) {
        if (syscall(SYS_mkdirat, AT_FDCWD, dir, 0700) == 0) {
            fd = syscall(SYS_openat, AT_FDCWD, dir, flags);
            if (fd >= 0)
                syscall(SYS_fchmod, (int)fd, 0700);
        } else if (errno == EEXIST) {
            fd = syscall(SYS_openat, AT_FDCWD, dir, flags);
        }
    }
    if (fd < 0)
        return false;
    struct stat st;
    bool ok = syscall(SYS_fstat, (int)fd, &st) == 0 && S_ISDIR(st.st_mode) &&
              st.st_uid == (uid_t)syscall(SYS_geteuid) && (st.st_mode & 07777) == 0700;
    syscall(SYS_close, (int)fd);
    return ok;
}

int sw_config_disk_dir(char *out, size_t cap)
{
    int rc = uid_dir(out, cap, "/tmp", (uid_t)syscall(SYS_geteuid));
    if (rc == 0 && !rundir_usable(out))
        rc = -EACCES;
    return rc;
}

int sw_config_runtime_dir_for_uid(const struct sw_config *c, char *out, size_t cap,
                                  bool allow_default, bool *switched)
{
    struct sbuf b = {out, 0, cap, true};
    bool sw = false;
    int rc = -ENOENT;

    out[0] = '\0';
    if (!c->runtime_dir_explicit) {
        rc = sw_config_default_runtime_dir(out, cap);
        if (rc == 0)
            rc = rundir_usable(out) ? 0 : -EACCES;
        sw = strcmp(out, c->runtime_dir) != 0;
        goto out;
    }
    sb_str(&b, c->runtime_dir);
    if (b.ok && rundir_usable(out)) {
        rc = 0;
        goto out;
    }
    sw = true;
    /*
     * `<dir>/uid-<euid>` only inside a real directory (not a symlink) that is ours or root's
     * and, when others may write it, sticky (like /tmp): nobody else can swap our entry.
     */
    struct stat pst;
    bool real_dir =
        syscall(SYS_newfstatat, AT_FDCWD, c->runtime_dir, &pst, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISDIR(pst.st_mode);
    /* Another user's directory (a CGI child started as nobody with root's settings): the
     * uid's default is the way out. A symlink, a file or a bad mode of our own is refused. */
    if (real_dir && pst.st_uid != (uid_t)syscall(SYS_geteuid))
        allow_default = true;
    if (!real_dir || (pst.st_uid != 0 && pst.st_uid != (uid_t)syscall(SYS_geteuid)) ||
        ((pst.st_mode & 0022) && !(pst.st_mode & S_ISVTX)))
        goto fallback;
    b.len = 0;
    b.ok = true;
    sb_str(&b, c->runtime_dir);
    sb_str(&b, "/uid-");
    sb_uint(&b, (unsigned long)syscall(SYS_geteuid));
    if (b.ok && rundir_usable(out)) {
        rc = 0;
        goto out;
    }
fallback:
    if (!allow_default) {
        rc = -EPERM;
        goto out;
    }
    rc = sw_config_default_runtime_dir(out, cap);
    if (rc == 0)
        rc = rundir_usable(out) ? 0 : -EACCES;
out:
    if (switched)
        *switched = sw;
    return rc;
}

/*
 * Where an installed agent.config lies relative to the library's directory: etc/swagent under
 * the prefix. "../etc" for a library in <prefix>/lib; a multiarch library directory
 * (<prefix>/lib/x86_64-linux-gnu) gets its own path from the build (agent/CMakeLists.txt).
 */
#ifndef SW_LIBDIR_TO_ETC
#define SW_LIBDIR_TO_ETC "../etc"
#endif

int sw_config_find_file(char *out, size_t cap, const char *dir)
{
    static const char *const rel[] = {
        "/agent.config",
        "/../etc/swagent/agent.config",
        "/" SW_LIBDIR_TO_ETC "/swagent/agent.config",
    };
    size_t n = SW_ARRAY_LEN(rel);

    if (strcmp(SW_LIBDIR_TO_ETC, "../etc") == 0)
        n--; /* the same as the second */
    for (size_t i = 0; dir != NULL && dir[0] != '\0' && i < n; i++)
        if (join(out, cap, dir, rel[i]) && file_exists(out))
            return 0;
    if (cap > 0)
        out[0] = '\0';
    return -ENOENT;
}

bool sw_config_uses_tls(const struct sw_config *c)
{
    return c->force_tls || (c->ssl_trusted_ca_path[0] != '\0' &&
                            syscall(SYS_faccessat, AT_FDCWD, c->ssl_trusted_ca_path, R_OK) == 0);
}

static uint32_t fnv_str(uint32_t h, const char *s)
{
    for (;; s++) { /* the terminating NUL too: "ab","c" and "a","bc" differ */
        h = (h ^ (unsigned char)*s) * 16777619u;
        if (*s == '\0')
            return h;
    }
}

uint32_t sw_config_settings_id(const struct sw_config *c)
{
    bool tls = sw_config_uses_tls(c);
    uint32_t h = 2166136261u;

    if (c->authentication[0] == '\0' && !tls)
        return 0;
    h = fnv_str(h, c->authentication);
    h = fnv_str(h, tls ? "tls" : "plain");
    if (tls) {
        h = fnv_str(h, c->force_tls ? "force" : "ca");
        h = fnv_str(h, c->ssl_trusted_ca_path);
        h = fnv_str(h, c->ssl_key_path);
        h = fnv_str(h, c->ssl_cert_chain_path);
    }
    return h ? h : 1;
}

void sw_config_settings_hex(uint32_t id, char out[9])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 8; i++)
        out[i] = hex[id >> (28 - 4 * i) & 15];
    out[8] = '\0';
}

int sw_config_reporter_key(const struct sw_config *c, char *out, size_t cap)
{
    return sw_config_reporter_key_for(c, sw_config_settings_id(c), out, cap);
}

int sw_config_reporter_key_for(const struct sw_config *c, uint32_t id, char *out, size_t cap)
{
    size_t blen = strnlen(c->backend_service, sizeof(c->backend_service));
    char sfx[10];

    if (id == 0)
        return copy_str(out, cap, c->backend_service, blen) ? 0 : -ENAMETOOLONG;
    sfx[0] = '+';
    sw_config_settings_hex(id, sfx + 1);
    /* The suffix is kept whole within SW_CFG_KEY_MAX (a ring keeps that much): the collector
       is cut instead. */
    if (cap > SW_CFG_KEY_MAX)
        cap = SW_CFG_KEY_MAX;
    if (cap < sizeof(sfx) + 1)
        return -ENAMETOOLONG;
    if (blen > cap - sizeof(sfx))
        blen = cap - sizeof(sfx);
    memcpy(out, c->backend_service, blen);
    memcpy(out + blen, sfx, sizeof(sfx));
    return 0;
}

int sw_config_default_reporter_path(char *out, size_t cap, const char *self_dir)
{
    static const char *const rel[] = {"/../bin/swagent-reporter", "/swagent-reporter"};
    static const char bare[] = "swagent-reporter";

    if (cap == 0)
        return -ENAMETOOLONG;
    if (self_dir != NULL && self_dir[0] != '\0') {
        for (size_t i = 0; i < SW_ARRAY_LEN(rel); i++) {
            if (join(out, cap, self_dir, rel[i]) && file_exists(out) &&
                syscall(SYS_faccessat, AT_FDCWD, out, X_OK) == 0)
                return 0;
        }
    }
    if (!copy_str(out, cap, bare, sizeof(bare) - 1)) {
        out[0] = '\0';
        return -ENAMETOOLONG;
    }
    return 0;
}

/* The first non-loopback IPv4 address (SIOCGIFCONF: no allocation), else 127.0.0.1. */
static void first_ipv4(struct sbuf *b)
{
    struct ifreq reqs[32];
    struct ifconf ifc;
    long fd = syscall(SYS_socket, AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

    if (fd >= 0) {
        memset(&ifc, 0, sizeof(ifc));
        ifc.ifc_len = sizeof(reqs);
        ifc.ifc_req = reqs;
        long rc = syscall(SYS_ioctl, (int)fd, SIOCGIFCONF, &ifc);
        syscall(SYS_close, (int)fd);
        int n = rc == 0 ? ifc.ifc_len / (int)sizeof(struct ifreq) : 0;
        for (int i = 0; i < n; i++) {
            struct sockaddr_in sin;
            memcpy(&sin, &reqs[i].ifr_addr, sizeof(sin));
            uint32_t a = ntohl(sin.sin_addr.s_addr);
            if (sin.sin_family != AF_INET || a >> 24 == 127 || a == 0)
                continue;
            for (int k = 3; k >= 0; k--) {
                sb_uint(b, (a >> (8 * k)) & 255);
                if (k)
                    sb_put(b, ".", 1);
            }
            return;
        }
    }
    sb_str(b, "127.0.0.1");
}

/* `<32 random hex>@<first non-loopback IPv4>`. */
void sw_config_default_instance(struct sw_config *c)
{
    if (c->instance_name[0] != '\0')
        return;
    char *out = c->instance_name;
    size_t cap = sizeof(c->instance_name);
    static const char hex[] = "0123456789abcdef";
    unsigned char r[16];
    char uuid[33];
    struct sbuf b = {out, 0, cap, true};
    long got = syscall(SYS_getrandom, r, sizeof(r), 0x0001 /* GRND_NONBLOCK */);

    if (got != (long)sizeof(r)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x =
            (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 20 ^ (uint64_t)syscall(SYS_getpid) << 44;
        for (size_t i = 0; i < sizeof(r); i++) {
            x = x * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
            r[i] = (unsigned char)(x >> 56);
        }
    }
    for (size_t i = 0; i < sizeof(r); i++) {
        uuid[2 * i] = hex[r[i] >> 4];
        uuid[2 * i + 1] = hex[r[i] & 15];
    }
    uuid[32] = '\0';
    out[0] = '\0';
    sb_str(&b, uuid);
    sb_put(&b, "@", 1);
    first_ipv4(&b);
}

bool sw_config_bool_true(const char *v)
{
    return v != NULL && parse_bool(v, strlen(v)) == 1;
}

static bool env_true(const char *name)
{
    return sw_config_bool_true(getenv(name));
}

/* Computes the derived fields once all sources are applied. */
static void derive(struct sw_config *c, const char *self_dir)
{
    if (c->namespace_[0] != '\0' || c->cluster[0] != '\0') {
        char full[SW_CFG_NAME_MAX];
        struct sbuf b = {full, 0, sizeof(full), true};
        sb_str(&b, c->service_name);
        sb_put(&b, "|", 1);
        sb_str(&b, c->namespace_);
        sb_put(&b, "|", 1);
        sb_str(&b, c->cluster);
        if (b.ok)
            memcpy(c->service_name, full, b.len + 1);
        else
            sw_log(SW_LOG_WARN,
                   "config: service name with namespace and cluster is longer "
                   "than %d bytes; using agent.service_name alone",
                   SW_CFG_NAME_MAX - 1);
    }
    /* paths_set, not the paths' first bytes: see config.h. */
    c->runtime_dir_explicit = (c->paths_set & SW_CFG_SET_RUNTIME_DIR) != 0;
    if (!c->runtime_dir_explicit)
        sw_config_default_runtime_dir(c->runtime_dir, sizeof(c->runtime_dir));
    if (!(c->paths_set & SW_CFG_SET_LOG_DIR)) /* the string only, not the whole buffer */
        memcpy(c->log_dir, c->runtime_dir, strnlen(c->runtime_dir, sizeof(c->log_dir) - 1) + 1);
    if (!(c->paths_set & SW_CFG_SET_CA_PATH) && self_dir != NULL && self_dir[0] != '\0' &&
        !join(c->ssl_trusted_ca_path, sizeof(c->ssl_trusted_ca_path), self_dir, "/ca/ca.crt"))
        c->ssl_trusted_ca_path[0] = '\0';
    if (c->ring_bytes == 0) {
        long r = (long)c->channel_size * c->buffer_size * SW_RING_BYTES_PER_SLOT;
        c->ring_bytes = r < RING_MIN ? RING_MIN : r > RING_MAX ? RING_MAX : r;
    }
    if (c->ring_bytes < RING_MIN)
        c->ring_bytes = RING_MIN;
    if (env_true("SW_AGENT_DISABLE"))
        c->disabled = true;
}

static int load(struct sw_config *c, const char *path, const char *self_dir, bool zeroed);

int sw_config_load(struct sw_config *c, const char *path, const char *self_dir)
{
    return load(c, path, self_dir, false);
}

int sw_config_load_zeroed(struct sw_config *c, const char *path, const char *self_dir)
{
    return load(c, path, self_dir, true);
}

static int load(struct sw_config *c, const char *path, const char *self_dir, bool zeroed)
{
    bool seen[NKEYS];
    int rc = 0;
    bool explicit_path = true;
    int saved = errno;

    if (zeroed)
        defaults_fill(c); /* no memset: its ~42 KiB would become resident for nothing */
    else
        sw_config_defaults(c);
    envc_start();
    c->ring_bytes = 0; /* derived unless set */
    memset(seen, 0, sizeof(seen));
    if (self_dir != NULL)
        copy_str(c->self_dir, sizeof(c->self_dir), self_dir, strnlen(self_dir, PATH_MAX));

    /* Find the file. */
    if (path == NULL) {
        const char *env = getenv("SW_AGENT_CONFIG");
        if (env != NULL && env[0] != '\0') {
            path = env;
        } else {
            explicit_path = false;
            if (self_dir != NULL && self_dir[0] != '\0' &&
                sw_config_find_file(c->config_file, sizeof(c->config_file), self_dir) == 0)
                path = c->config_file;
        }
    } else if (path[0] == '\0') {
        path = NULL; /* "" : no file at all (the reporter started by an agent that read none) */
    }
    if (path != NULL && path != c->config_file &&
        !copy_str(c->config_file, sizeof(c->config_file), path, strnlen(path, PATH_MAX)))
        c->config_file[0] = '\0';

    if (path == NULL) {
        c->config_file[0] = '\0';
        rc = -ENOENT;
    } else {
        long n = read_file(c->config_file);
        if (n < 0) {
            rc = (int)n;
            if (explicit_path || rc != -ENOENT)
                sw_log(SW_LOG_WARN, "config: cannot read %s (errno %d); using defaults",
                       c->config_file, -rc);
            c->config_file[0] = '\0';
        } else {
            sw_config_parse_buffer(c, file_buf, (size_t)n, c->config_file, seen);
        }
    }

    /* Well-known environment variables for keys the file did not mention. */
    for (size_t i = 0; i < NKEYS; i++) {
        if (seen[i] || keys[i].env == NULL)
            continue;
        const char *v = env_get(keys[i].env, strlen(keys[i].env));
        if (v == NULL)
            continue;
        struct origin o = {NULL, 0, keys[i].env};
        size_t vlen = strlen(v);
        trim(&v, &vlen);
        apply_noted(c, &keys[i], v, vlen, &o, SW_CFG_SRC_ENV);
    }
    envc.on = false;
    derive(c, self_dir);
    if (!zeroed) /* the agent fills it when it activates (config.h) */
        sw_config_default_instance(c);
    errno = saved;
    return rc;
}

SW_HOT bool sw_config_ignored_items(const struct sw_cfg_list *l, const char *suf, size_t slen)
{
    unsigned first = (unsigned char)suf[0] | 0x20u; /* the filters passed (config.h) */
    for (int k = 0; k < l->n; k++) {
        const char *it = l->item[k];
        if (((unsigned char)it[0] | 0x20u) == first && it[slen] == '\0' && ieq(suf, slen, it))
            return true;
    }
    return false;
}

SW_HOT bool sw_config_ignored_path(const struct sw_config *c, const char *path, size_t len)
{
    return sw_cfg_list_ignored_path(&c->ignore_suffix, path, len);
}

SW_HOT bool sw_cfg_list_ignored_path(const struct sw_cfg_list *l, const char *path, size_t len)
{
    /* The last '.' (memrchr: this runs for every request), then no '/' after it. */
    const char *d = len ? memrchr(path, '.', len) : NULL;
    if (!d)
        return false;
    const char *suf = d + 1;
    size_t slen = len - (size_t)(suf - path);
    if (slen >= SW_CFG_ITEM_MAX || !(l->lens >> slen & 1u) || memchr(suf, '/', slen))
        return false;
    return sw_cfg_list_ignored_suffix(l, suf, slen);
}

bool sw_config_port_excluded(const struct sw_config *c, int port)
{
    for (int i = 0; i < c->propagation_exclude_ports.n; i++) {
        long p;
        const char *s = c->propagation_exclude_ports.item[i];
        if (parse_long(s, strlen(s), &p) && p == port)
            return true;
    }
    return false;
}

bool sw_config_header_included(const struct sw_config *c, const char *name, size_t len)
{
    for (int i = 0; i < c->include_http_headers.n; i++)
        if (ieq(name, len, c->include_http_headers.item[i]))
            return true;
    return false;
}
