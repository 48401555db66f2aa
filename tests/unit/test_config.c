/*
 * test_config.c - agent.config parsing, ${ENV:default} expansion, environment precedence,
 * bad values and unknown keys (one log line naming file:line), derived values, lists.
 */
#include "common.h"

#include "config.h"
#include "log.h"

#include "check.h"

#include <linux/magic.h>
#include <regex.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

extern char **environ;

static char dir[] = "/tmp/swagent-test-config-XXXXXX";
static struct sw_config cfg;

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs(text, f);
    fclose(f);
}

/*
 * The default runtime directory without XDG_RUNTIME_DIR on this machine: /dev/shm/swagent-<uid>
 * when /dev/shm is a tmpfs of at least 512 MiB (or unlimited), root's and sticky, as on Debian
 * and most hosts (test_shm_default says so when it is not), else /tmp/swagent-<uid>.
 */
static bool shm_here(void)
{
    struct statfs sf;
    struct stat st;
    return statfs("/dev/shm", &sf) == 0 && sf.f_type == TMPFS_MAGIC &&
           (sf.f_blocks == 0 ||
            (unsigned long long)sf.f_blocks * (unsigned long long)sf.f_bsize >= (512ull << 20)) &&
           stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) &&
           (st.st_uid == 0 || st.st_uid == geteuid());
}

static void default_rt(char *out, size_t cap)
{
    snprintf(out, cap, "%s/swagent-%u", shm_here() ? "/dev/shm" : "/tmp", (unsigned)geteuid());
}

static const char *conf_path(const char *name)
{
    static char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    return p;
}

/* Writes `text` to <dir>/<name> and loads it; returns sw_config_load's result. */
static int load_text(const char *name, const char *text)
{
    write_file(conf_path(name), text);
    return sw_config_load(&cfg, conf_path(name), NULL);
}

static const char *log_text(void)
{
    static char buf[1 << 16];
    FILE *f = fopen(conf_path("log/c.log"), "r");
    CHECK(f != NULL);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static int log_count(const char *needle)
{
    int n = 0;
    for (const char *p = strstr(log_text(), needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* One expected log line: `config <file>:<line>: <what>`. */
struct want_line {
    int line;
    const char *what;
};

/* Each of the n lines is in the log exactly once, for config file <dir>/<name>. */
static void expect_lines(const char *name, const struct want_line *w, size_t n)
{
    char want[700];
    for (size_t i = 0; i < n; i++) {
        snprintf(want, sizeof(want), "config %s:%d: %s", conf_path(name), w[i].line, w[i].what);
        if (log_count(want) != 1)
            fprintf(stderr, "missing: %s\n%s", want, log_text());
        CHECK_EQ(log_count(want), 1);
    }
}

/* Removes every SW_* variable and XDG_RUNTIME_DIR, so the host environment cannot interfere. */
static void clean_env(void)
{
    for (;;) {
        char name[256] = {0};
        for (char **e = environ; *e; e++) {
            if (strncmp(*e, "SW_", 3) == 0 || strncmp(*e, "XDG_RUNTIME_DIR=", 16) == 0) {
                const char *eq = strchr(*e, '=');
                size_t n = eq ? (size_t)(eq - *e) : strlen(*e);
                if (n < sizeof(name))
                    memcpy(name, *e, n);
                break;
            }
        }
        if (name[0] == '\0')
            return;
        unsetenv(name);
    }
}

static void test_defaults(void)
{
    sw_config_defaults(&cfg);
    CHECK_STR(cfg.service_name, "Your_ApplicationName");
    CHECK_EQ(cfg.sample_n_per_3_secs, -1);
    CHECK_EQ(cfg.ignore_suffix.n, 12);
    CHECK_STR(cfg.ignore_suffix.item[0], "jpg");
    CHECK_STR(cfg.ignore_suffix.item[11], "svg");
    CHECK_EQ(cfg.span_limit_per_segment, 300);
    CHECK_EQ(cfg.trace_segment_ref_limit_per_span, 500);
    CHECK_EQ(cfg.operation_name_threshold, 150);
    CHECK(!cfg.keep_tracing && !cfg.force_tls && !cfg.disabled && cfg.grpc_gzip);
    CHECK_STR(cfg.backend_service, "127.0.0.1:11800");
    CHECK_EQ(cfg.heartbeat_period, 30);
    CHECK_EQ(cfg.properties_report_period_factor, 10);
    CHECK_EQ(cfg.grpc_upstream_timeout, 30);
    CHECK_EQ(cfg.channel_size, 5);
    CHECK_EQ(cfg.buffer_size, 300);
    CHECK_EQ(cfg.log_level, SW_LOG_INFO);
    CHECK_STR(cfg.log_file_name, "swagent.log");
    CHECK_EQ(cfg.log_max_file_size, 314572800);
    CHECK_EQ(cfg.correlation_element_max_number, 3);
    CHECK_EQ(cfg.correlation_value_max_length, 128);
    CHECK_EQ(cfg.peer_max_length, 200);
    CHECK_EQ(cfg.http_params_length_threshold, 1024);
    CHECK_EQ(cfg.http_headers_length_threshold, 2048);
    CHECK_EQ(cfg.reporter_idle_exit, 10);
    CHECK_EQ(cfg.ring_bytes, 5L * 300 * 1024);
    CHECK_EQ(cfg.ring_total_cap, 256L * 1024 * 1024);
}

static void test_missing_file(void)
{
    int before = log_count("cannot read");
    CHECK_EQ(sw_config_load(&cfg, conf_path("nope.config"), NULL), -ENOENT);
    CHECK_STR(cfg.service_name, "Your_ApplicationName");
    CHECK_STR(cfg.config_file, "");
    CHECK_EQ(log_count("cannot read"), before + 1); /* an explicit path is worth a line */
    /* Nothing found by the default search: -ENOENT, quietly. */
    CHECK_EQ(sw_config_load(&cfg, NULL, conf_path("empty-dir-none")), -ENOENT);
    CHECK_EQ(log_count("cannot read"), before + 1);
    /* Derived values are filled anyway. */
    regex_t re;
    CHECK(regcomp(&re, "^[0-9a-f]{32}@[0-9]+\\.[0-9]+\\.[0-9]+\\.[0-9]+$", REG_EXTENDED) == 0);
    CHECK(regexec(&re, cfg.instance_name, 0, NULL, 0) == 0);
    regfree(&re);
    char rt[64];
    default_rt(rt, sizeof(rt));
    CHECK_STR(cfg.runtime_dir, rt);
    CHECK_STR(cfg.log_dir, rt);
    CHECK_STR(cfg.reporter_path, ""); /* spawn.c looks the default up when it is needed */
}

static void test_file_parse(void)
{
    int rc = load_text("full.config", "# a comment\n"
                                      "   # an indented comment\n"
                                      "\n"
                                      "agent.service_name = my-svc \n"
                                      "agent.instance_name=inst-1\r\n"
                                      "agent.sample_n_per_3_secs=7\n"
                                      "agent.span_limit_per_segment=42\n"
                                      "agent.keep_tracing=TRUE\n"
                                      "agent.force_tls=on\n"
                                      "agent.authentication=tok en\n"
                                      "collector.backend_service=10.0.0.1:11800,10.0.0.2:11800\n"
                                      "collector.heartbeat_period=5\n"
                                      "buffer.channel_size=2\n"
                                      "buffer.buffer_size=100\n"
                                      "logging.level=debug\n"
                                      "logging.file_name=x.log\n"
                                      "logging.max_file_size=1000\n"
                                      "logging.pattern=%level %msg\n"
                                      "plugin.peer_max_length=99\n"
                                      "plugin.tomcat.collect_http_params=true\n"
                                      "swagent.runtime_dir=/run/x\n"
                                      "swagent.reporter_path=/opt/r\n"
                                      "swagent.reporter_idle_exit=0\n"
                                      "swagent.grpc_gzip=false\n"
                                      "swagent.ring_total_cap=1048576\n"
                                      "agent.operation_name_threshold=");
    CHECK_EQ(rc, 0);
    CHECK_STR(cfg.config_file, conf_path("full.config"));
    CHECK_STR(cfg.service_name, "my-svc");
    CHECK_STR(cfg.instance_name, "inst-1");
    CHECK_EQ(cfg.sample_n_per_3_secs, 7);
    CHECK_EQ(cfg.span_limit_per_segment, 42);
    CHECK(cfg.keep_tracing && cfg.force_tls && !cfg.grpc_gzip);
    CHECK_STR(cfg.authentication, "tok en");
    CHECK_STR(cfg.backend_service, "10.0.0.1:11800,10.0.0.2:11800");
    CHECK_EQ(cfg.heartbeat_period, 5);
    CHECK_EQ(cfg.log_level, SW_LOG_DEBUG);
    CHECK_STR(cfg.log_file_name, "x.log");
    CHECK_EQ(cfg.log_max_file_size, 1000);
    CHECK_EQ(cfg.peer_max_length, 99);
    CHECK(cfg.collect_http_params_entry && !cfg.collect_http_params_exit);
    CHECK_STR(cfg.runtime_dir, "/run/x");
    CHECK_STR(cfg.log_dir, "/run/x");
    CHECK_STR(cfg.reporter_path, "/opt/r");
    CHECK_EQ(cfg.reporter_idle_exit, 0);
    CHECK_EQ(cfg.ring_total_cap, 1048576);
    CHECK_EQ(cfg.operation_name_threshold, 150); /* empty value: default, no error */
    CHECK_EQ(cfg.ring_bytes, 2L * 100 * 1024);
}

static void test_placeholders(void)
{
    const char *text = "agent.sample_n_per_3_secs=${SW_AGENT_SAMPLE:-1}\n"
                       "agent.namespace=${SW_TEST_NS:ns}\n"
                       "collector.backend_service=${SW_TEST_HOST:h}:${SW_TEST_PORT:1}\n"
                       "agent.cluster=${SW_TEST_UNSET_NO_DEFAULT}\n"
                       "agent.authentication=${SW_TEST_AUTH:a:b:c}\n"
                       "logging.file_name=${SW_TEST_BROKEN:x.log\n";
    CHECK_EQ(load_text("ph.config", text), 0);
    CHECK_EQ(cfg.sample_n_per_3_secs, -1); /* the FIRST ':' splits: default "-1" */
    CHECK_STR(cfg.namespace_, "ns");
    CHECK_STR(cfg.backend_service, "h:1");
    CHECK_STR(cfg.cluster, "");
    CHECK_STR(cfg.authentication, "a:b:c");
    CHECK_STR(cfg.log_file_name, "${SW_TEST_BROKEN:x.log"); /* unterminated: literal */
    CHECK_STR(cfg.service_name, "Your_ApplicationName|ns|");

    setenv("SW_AGENT_SAMPLE", "5", 1);
    setenv("SW_TEST_NS", "", 1); /* set to empty: wins over the default */
    setenv("SW_TEST_PORT", "11800", 1);
    CHECK_EQ(load_text("ph.config", text), 0);
    CHECK_EQ(cfg.sample_n_per_3_secs, 5);
    CHECK_STR(cfg.namespace_, "");
    CHECK_STR(cfg.backend_service, "h:11800");
    CHECK_STR(cfg.service_name, "Your_ApplicationName");
    unsetenv("SW_AGENT_SAMPLE");
    unsetenv("SW_TEST_NS");
    unsetenv("SW_TEST_PORT");
}

static void test_env_precedence(void)
{
    /* No file at all: the well-known variables still apply. */
    setenv("SW_AGENT_NAME", "from-env", 1);
    setenv("SW_AGENT_COLLECTOR_BACKEND_SERVICES", "oap:11800", 1);
    setenv("SW_AGENT_SAMPLE", "3", 1);
    setenv("SW_BUFFER_CHANNEL_SIZE", "1", 1);
    setenv("SW_BUFFER_BUFFER_SIZE", "1", 1);
    CHECK_EQ(sw_config_load(&cfg, NULL, NULL), -ENOENT);
    CHECK_STR(cfg.service_name, "from-env");
    CHECK_STR(cfg.backend_service, "oap:11800");
    CHECK_EQ(cfg.sample_n_per_3_secs, 3);
    CHECK_EQ(cfg.ring_bytes, 64 * 1024); /* clamped up */
    /* A literal file value is final; a key without a line still takes the variable. */
    CHECK_EQ(load_text("lit.config", "agent.service_name=from-file\n"), 0);
    CHECK_STR(cfg.service_name, "from-file");
    CHECK_STR(cfg.backend_service, "oap:11800");
    /* A placeholder in the file uses the variable. */
    CHECK_EQ(load_text("ph2.config", "agent.service_name=${SW_AGENT_NAME:dflt}\n"), 0);
    CHECK_STR(cfg.service_name, "from-env");
    /* A bad value in a well-known variable: one line naming the variable, default kept. */
    setenv("SW_AGENT_SAMPLE", "lots", 1);
    int before = log_count("environment SW_AGENT_SAMPLE");
    CHECK_EQ(sw_config_load(&cfg, NULL, NULL), -ENOENT);
    CHECK_EQ(cfg.sample_n_per_3_secs, -1);
    CHECK_EQ(log_count("environment SW_AGENT_SAMPLE"), before + 1);
    /* Large buffers: clamped down. */
    setenv("SW_BUFFER_CHANNEL_SIZE", "100", 1);
    setenv("SW_BUFFER_BUFFER_SIZE", "100000", 1);
    CHECK_EQ(sw_config_load(&cfg, NULL, NULL), -ENOENT);
    CHECK_EQ(cfg.ring_bytes, 64L * 1024 * 1024);
    clean_env();
}

static void test_config_file_search(void)
{
    char sub[512], etc[512];
    snprintf(sub, sizeof(sub), "%s/lib", dir);
    snprintf(etc, sizeof(etc), "%s/etc/swagent", dir);
    CHECK(mkdir(sub, 0700) == 0);
    CHECK(mkdir(conf_path("etc"), 0700) == 0);
    CHECK(mkdir(etc, 0700) == 0);
    write_file(conf_path("etc/swagent/agent.config"), "agent.service_name=etc\n");
    CHECK_EQ(sw_config_load(&cfg, NULL, sub), 0);
    CHECK_STR(cfg.service_name, "etc");
    write_file(conf_path("lib/agent.config"), "agent.service_name=beside\n");
    CHECK_EQ(sw_config_load(&cfg, NULL, sub), 0);
    CHECK_STR(cfg.service_name, "beside");
    CHECK_STR(cfg.config_file, conf_path("lib/agent.config"));
    CHECK_STR(cfg.self_dir, sub);
    write_file(conf_path("envfile.config"), "agent.service_name=envfile\n");
    setenv("SW_AGENT_CONFIG", conf_path("envfile.config"), 1);
    CHECK_EQ(sw_config_load(&cfg, NULL, sub), 0);
    CHECK_STR(cfg.service_name, "envfile");
    /* An explicit path wins over SW_AGENT_CONFIG. */
    CHECK_EQ(sw_config_load(&cfg, conf_path("lib/agent.config"), sub), 0);
    CHECK_STR(cfg.service_name, "beside");
    /* "" is an explicit "no file" (a reporter started by an agent that read none): neither
       SW_AGENT_CONFIG nor the search applies. */
    CHECK_EQ(sw_config_load(&cfg, "", sub), -ENOENT);
    CHECK_STR(cfg.service_name, "Your_ApplicationName");
    CHECK_STR(cfg.config_file, "");
    unsetenv("SW_AGENT_CONFIG");
    /* The reporter and swagent find <prefix>/etc/swagent from <prefix>/bin as the library
       does from <prefix>/lib. */
    char bin[512], found[600];
    snprintf(bin, sizeof(bin), "%s/ubin", dir);
    CHECK(mkdir(bin, 0700) == 0);
    CHECK_EQ(sw_config_find_file(found, sizeof(found), bin), 0);
    CHECK_STR(found, conf_path("ubin/../etc/swagent/agent.config"));
    CHECK_EQ(sw_config_load(&cfg, NULL, bin), 0);
    CHECK_STR(cfg.service_name, "etc");
    CHECK_EQ(sw_config_load(&cfg, conf_path("lib/agent.config"), sub), 0);
    /* ca.crt default under the agent dir. */
    char ca[600];
    snprintf(ca, sizeof(ca), "%s/ca/ca.crt", sub);
    CHECK_STR(cfg.ssl_trusted_ca_path, ca);
}

static void test_bad_values(void)
{
    int before_unknown = log_count("unknown key");
    int rc = load_text("bad.config", "agent.service_name=ok\n"
                                     "agent.no_such_key=1\n"
                                     "agent.span_limit_per_segment=abc\n"
                                     "buffer.channel_size=0\n"
                                     "agent.sample_n_per_3_secs=99999999999999999999\n"
                                     "agent.keep_tracing=maybe\n"
                                     "logging.level=chatty\n"
                                     "logging.file_name=a/b.log\n"
                                     "just some words\n"
                                     "collector.heartbeat_period=12x\n");
    CHECK_EQ(rc, 0);
    CHECK_STR(cfg.service_name, "ok");
    CHECK_EQ(cfg.span_limit_per_segment, 300);
    CHECK_EQ(cfg.channel_size, 5);
    CHECK_EQ(cfg.sample_n_per_3_secs, -1);
    CHECK(!cfg.keep_tracing);
    CHECK_EQ(cfg.log_level, SW_LOG_INFO);
    CHECK_STR(cfg.log_file_name, "swagent.log");
    CHECK_EQ(cfg.heartbeat_period, 30);
    char want[600];
    snprintf(want, sizeof(want), "config %s:2: unknown key agent.no_such_key",
             conf_path("bad.config"));
    CHECK_EQ(log_count(want), 1);
    CHECK_EQ(log_count("unknown key"), before_unknown + 1);
    static const struct want_line lines[] = {{3, "not an integer for agent.span_limit_per_segment"},
                                             {4, "out of range for buffer.channel_size"},
                                             {5, "not an integer for agent.sample_n_per_3_secs"},
                                             {6, "not a boolean for agent.keep_tracing"},
                                             {7, "not a log level for logging.level"},
                                             {8, "bad file name for logging.file_name"},
                                             {9, "no '='"},
                                             {10, "not an integer for collector.heartbeat_period"}};
    expect_lines("bad.config", lines, SW_ARRAY_LEN(lines));
    /* A string too long for its field. */
    char big[600];
    memset(big, 'n', 300);
    snprintf(big + 300, sizeof(big) - 300, "\n");
    char text[700];
    snprintf(text, sizeof(text), "agent.service_name=%s", big);
    CHECK_EQ(load_text("long.config", text), 0);
    CHECK_STR(cfg.service_name, "Your_ApplicationName");
    snprintf(want, sizeof(want), "config %s:1: value too long for agent.service_name",
             conf_path("long.config"));
    CHECK_EQ(log_count(want), 1);
}

/* swagent.log_capture and its limits (docs/logs.md): off by default, on/all/true/false, a bad
 * value logged with file:line and the default kept. */
static void test_log_capture(void)
{
    CHECK_EQ(load_text("lc0.config", "agent.service_name=x\n"), 0);
    CHECK_EQ(cfg.log_capture, SW_LOGCAP_OFF);
    CHECK_EQ(cfg.log_cap_bytes_per_sec, 1048576);
    CHECK_EQ(cfg.log_max_line, 16384);
    CHECK_EQ(load_text("lc1.config", "swagent.log_capture=ALL\nswagent.log_max_line=64\n"
                                     "swagent.log_cap_bytes_per_sec=0\n"),
             0);
    CHECK_EQ(cfg.log_capture, SW_LOGCAP_ALL);
    CHECK_EQ(cfg.log_max_line, 64);
    CHECK_EQ(cfg.log_cap_bytes_per_sec, 0);
    CHECK_EQ(load_text("lc2.config", "swagent.log_capture=true\n"), 0);
    CHECK_EQ(cfg.log_capture, SW_LOGCAP_ON);
    CHECK_EQ(load_text("lc3.config", "swagent.log_capture=sometimes\nswagent.log_max_line=10\n"
                                     "swagent.log_cap_bytes_per_sec=-1\n"),
             0);
    CHECK_EQ(cfg.log_capture, SW_LOGCAP_OFF);
    CHECK_EQ(cfg.log_max_line, 16384);
    CHECK_EQ(cfg.log_cap_bytes_per_sec, 1048576);
    static const struct want_line lines[] = {{1, "not off, on or all for swagent.log_capture"},
                                             {2, "out of range for swagent.log_max_line"},
                                             {3, "out of range for swagent.log_cap_bytes_per_sec"}};
    expect_lines("lc3.config", lines, SW_ARRAY_LEN(lines));
}

/*
 * Keys the Java agent has and swagent does not do (issue 33): each line is refused with one log
 * line naming file:line and why; they change nothing and their Java environment variables are
 * not read. The per-span ref and log limits hold from 1 (a span has at most one of each): 0 is
 * refused as out of range.
 */
static void test_refused_keys(void)
{
    setenv("SW_AGENT_FORCE_RECONNECTION_PERIOD", "5", 1);
    setenv("SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL", "5", 1);
    int before = log_count("is not supported by swagent");
    CHECK_EQ(load_text("refused.config",
                       "agent.force_reconnection_period=${SW_AGENT_FORCE_RECONNECTION_PERIOD:1}\n"
                       "collector.grpc_channel_check_interval=30\n"
                       "collector.get_profile_task_interval=20\n"
                       "collector.get_agent_dynamic_config_interval=7\n"
                       "agent.trace_segment_ref_limit_per_span=0\n"
                       "agent.log_limit_per_span=0\n"
                       "# a comment\n"
                       "agent.service_name=still-read\n"),
             0);
    CHECK_STR(cfg.service_name, "still-read");
    CHECK_EQ(log_count("is not supported by swagent"), before + 2);
    CHECK_EQ(cfg.cds_interval, 7); /* CDS (issue 38): supported */
    CHECK_EQ(cfg.get_profile_task_interval, 20); /* profiling (issue 39): supported */
    static const struct want_line lines[] = {
        {1, "agent.force_reconnection_period is not supported by swagent and is ignored: the "
            "reporter reconnects by itself"},
        {2, "collector.grpc_channel_check_interval is not supported by swagent and is ignored: "
            "the reporter does not poll its channel"},
        {5, "out of range for agent.trace_segment_ref_limit_per_span"},
        {6, "out of range for agent.log_limit_per_span"},
    };
    expect_lines("refused.config", lines, SW_ARRAY_LEN(lines));
    CHECK_EQ(cfg.trace_segment_ref_limit_per_span, 500);
    CHECK_EQ(cfg.log_limit_per_span, 500);
    /* Without a line, their Java environment variables are not read (no line, no log). */
    before = log_count("is not supported by swagent");
    CHECK_EQ(load_text("norefused.config", "agent.trace_segment_ref_limit_per_span=1\n"
                                           "agent.log_limit_per_span=7\n"),
             0);
    CHECK_EQ(log_count("is not supported by swagent"), before);
    CHECK_EQ(cfg.trace_segment_ref_limit_per_span, 1);
    CHECK_EQ(cfg.log_limit_per_span, 7);
    unsetenv("SW_AGENT_FORCE_RECONNECTION_PERIOD");
    unsetenv("SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL");
}

/*
 * The reporter key (issue 33): the collector alone without a token or TLS; with either, a
 * settings id that differs with the token and the TLS choice, always within SW_CFG_KEY_MAX.
 */
static void test_reporter_key(void)
{
    char k1[SW_CFG_STR_MAX], k2[SW_CFG_STR_MAX], k3[SW_CFG_STR_MAX];
    CHECK_EQ(load_text("k.config", "collector.backend_service=oap:11800\n"), 0);
    CHECK_EQ(sw_config_settings_id(&cfg), 0u);
    CHECK_EQ(sw_config_reporter_key(&cfg, k1, sizeof(k1)), 0);
    CHECK_STR(k1, "oap:11800");
    CHECK_EQ(load_text("k.config", "collector.backend_service=oap:11800\n"
                                   "agent.authentication=${SW_AGENT_AUTHENTICATION:s3cret}\n"),
             0);
    CHECK_EQ(sw_config_reporter_key(&cfg, k1, sizeof(k1)), 0);
    CHECK(strncmp(k1, "oap:11800+", 10) == 0 && strlen(k1) == 18);
    for (int i = 10; i < 18; i++)
        CHECK((k1[i] >= '0' && k1[i] <= '9') || (k1[i] >= 'a' && k1[i] <= 'f'));
    setenv("SW_AGENT_AUTHENTICATION", "other", 1);
    CHECK_EQ(sw_config_load(&cfg, conf_path("k.config"), NULL), 0);
    CHECK_EQ(sw_config_reporter_key(&cfg, k2, sizeof(k2)), 0);
    unsetenv("SW_AGENT_AUTHENTICATION");
    CHECK(strncmp(k2, "oap:11800+", 10) == 0 && strcmp(k1, k2) != 0);
    CHECK_EQ(load_text("k.config", "collector.backend_service=oap:11800\n"
                                   "agent.authentication=s3cret\nagent.force_tls=true\n"),
             0);
    CHECK(sw_config_uses_tls(&cfg));
    CHECK_EQ(sw_config_reporter_key(&cfg, k3, sizeof(k3)), 0);
    CHECK(strcmp(k3, k1) != 0 && strcmp(k3, k2) != 0);
    /* A long collector list is cut, the settings id kept whole. */
    char text[400];
    memset(k3, 'h', 200);
    k3[200] = '\0';
    snprintf(text, sizeof(text), "collector.backend_service=%s\nagent.authentication=t\n", k3);
    CHECK_EQ(load_text("k.config", text), 0);
    CHECK_EQ(sw_config_reporter_key(&cfg, k2, sizeof(k2)), 0);
    CHECK_EQ(strlen(k2), (size_t)SW_CFG_KEY_MAX - 1);
    CHECK(k2[SW_CFG_KEY_MAX - 1 - 9] == '+');
}

static void test_composition(void)
{
    CHECK_EQ(load_text("c1.config", "agent.service_name=svc\nagent.namespace=ns\n"
                                    "agent.cluster=cl\n"),
             0);
    CHECK_STR(cfg.service_name, "svc|ns|cl");
    CHECK_EQ(load_text("c2.config", "agent.service_name=svc\nagent.cluster=cl\n"), 0);
    CHECK_STR(cfg.service_name, "svc||cl");
    CHECK_STR(cfg.cluster, "cl");
    CHECK_EQ(load_text("c3.config", "agent.service_name=svc\n"), 0);
    CHECK_STR(cfg.service_name, "svc");
}

static void test_lists(void)
{
    CHECK_EQ(load_text("l.config", "agent.ignore_suffix=.a, .B ,c,,\n"
                                   "plugin.http.include_http_headers=X-Foo, Content-Type\n"
                                   "plugin.httpclient.propagation_exclude_ports=8080, 9090\n"
                                   "correlation.auto_tag_keys=k1,k2\n"),
             0);
    CHECK_EQ(cfg.ignore_suffix.n, 3);
    CHECK_STR(cfg.ignore_suffix.item[0], "a");
    CHECK_STR(cfg.ignore_suffix.item[1], "B");
    CHECK_STR(cfg.ignore_suffix.item[2], "c");
    CHECK_EQ(cfg.include_http_headers.n, 2);
    CHECK_STR(cfg.include_http_headers.item[0], "x-foo");
    CHECK_STR(cfg.include_http_headers.item[1], "content-type");
    CHECK(sw_config_header_included(&cfg, "Content-TYPE", 12));
    CHECK(!sw_config_header_included(&cfg, "Content", 7));
    CHECK(sw_config_port_excluded(&cfg, 8080));
    CHECK(sw_config_port_excluded(&cfg, 9090));
    CHECK(!sw_config_port_excluded(&cfg, 80));
    CHECK_EQ(cfg.correlation_auto_tag_keys.n, 2);
    CHECK(sw_config_ignored_path(&cfg, "/x/y.a", 6));
    CHECK(sw_config_ignored_path(&cfg, "/x/y.b", 6)); /* case-insensitive */
    CHECK(!sw_config_ignored_path(&cfg, "/x/y.d", 6));
    CHECK(!sw_config_ignored_path(&cfg, "/x.a/y", 6));
    CHECK(!sw_config_ignored_path(&cfg, "/noext", 6));
    CHECK(!sw_config_ignored_path(&cfg, "", 0));
    CHECK(sw_config_ignored_path(&cfg, "/x/y.a?q", 6)); /* only `len` bytes count */
    /* A bad port or a too-long item: the whole list keeps its default, one line. */
    CHECK_EQ(load_text("l2.config", "plugin.httpclient.propagation_exclude_ports=80,http\n"
                                    "agent.ignore_suffix=.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n"),
             0);
    CHECK_EQ(cfg.propagation_exclude_ports.n, 0);
    CHECK_EQ(cfg.ignore_suffix.n, 12);
    CHECK(sw_config_ignored_path(&cfg, "/static/app.js", 14));
    CHECK(!sw_config_ignored_path(&cfg, "/api/orders", 11));
    char want[600];
    snprintf(want, sizeof(want), "config %s:1: bad port in", conf_path("l2.config"));
    CHECK_EQ(log_count(want), 1);
    snprintf(want, sizeof(want), "config %s:2: an entry is too long", conf_path("l2.config"));
    CHECK_EQ(log_count(want), 1);
}

static void test_disable(void)
{
    CHECK_EQ(load_text("d.config", "swagent.enabled=false\n"), 0);
    CHECK(cfg.disabled);
    CHECK_EQ(load_text("d.config", "swagent.enabled=true\n"), 0);
    CHECK(!cfg.disabled);
    setenv("SW_AGENT_DISABLE", "1", 1);
    CHECK_EQ(load_text("d.config", "swagent.enabled=true\n"), 0);
    CHECK(cfg.disabled);
    setenv("SW_AGENT_DISABLE", "0", 1);
    CHECK_EQ(load_text("d.config", "swagent.enabled=true\n"), 0);
    CHECK(!cfg.disabled);
    unsetenv("SW_AGENT_DISABLE");
}

static void test_runtime_and_reporter(void)
{
    char out[4096], want[600];
    setenv("XDG_RUNTIME_DIR", dir, 1);
    CHECK_EQ(sw_config_default_runtime_dir(out, sizeof(out)), 0);
    snprintf(want, sizeof(want), "%s/swagent", dir);
    CHECK_STR(out, want);
    setenv("XDG_RUNTIME_DIR", "relative/dir", 1);
    CHECK_EQ(sw_config_default_runtime_dir(out, sizeof(out)), 0);
    default_rt(want, sizeof(want));
    CHECK_STR(out, want);
    setenv("XDG_RUNTIME_DIR", conf_path("no-such-dir"), 1);
    CHECK_EQ(sw_config_default_runtime_dir(out, sizeof(out)), 0);
    CHECK_STR(out, want);
    unsetenv("XDG_RUNTIME_DIR");
    CHECK_EQ(sw_config_default_runtime_dir(out, 5), -ENAMETOOLONG);

    /* Reporter: <self>/../bin first, then <self>, else the bare name. */
    char lib[512], bin[512];
    snprintf(lib, sizeof(lib), "%s/rlib", dir);
    snprintf(bin, sizeof(bin), "%s/bin", dir);
    CHECK(mkdir(lib, 0700) == 0);
    CHECK(mkdir(bin, 0700) == 0);
    CHECK_EQ(sw_config_default_reporter_path(out, sizeof(out), lib), 0);
    CHECK_STR(out, "swagent-reporter");
    write_file(conf_path("rlib/swagent-reporter"), "#!/bin/sh\n");
    CHECK_EQ(sw_config_default_reporter_path(out, sizeof(out), lib), 0);
    CHECK_STR(out, "swagent-reporter"); /* not executable yet */
    chmod(conf_path("rlib/swagent-reporter"), 0700);
    CHECK_EQ(sw_config_default_reporter_path(out, sizeof(out), lib), 0);
    snprintf(want, sizeof(want), "%s/swagent-reporter", lib);
    CHECK_STR(out, want);
    write_file(conf_path("bin/swagent-reporter"), "#!/bin/sh\n");
    chmod(conf_path("bin/swagent-reporter"), 0700);
    CHECK_EQ(sw_config_default_reporter_path(out, sizeof(out), lib), 0);
    snprintf(want, sizeof(want), "%s/../bin/swagent-reporter", lib);
    CHECK_STR(out, want);
    sw_config_load(&cfg, NULL, lib); /* finds <dir>/etc/swagent/agent.config */
    CHECK_STR(cfg.reporter_path, ""); /* left to spawn.c, which uses self_dir: */
    CHECK_STR(cfg.self_dir, lib);
}

/* The derived paths follow paths_set: a later empty value gives the default back. */
static void test_paths_set(void)
{
    char rt[64];
    default_rt(rt, sizeof(rt));
    CHECK_EQ(load_text("p1.config", "swagent.runtime_dir=/x/run\nlogging.dir=/x/log\n"
                                    "agent.ssl_trusted_ca_path=/x/ca.crt\n"),
             0);
    CHECK(cfg.runtime_dir_explicit);
    CHECK_STR(cfg.runtime_dir, "/x/run");
    CHECK_STR(cfg.log_dir, "/x/log");
    CHECK_STR(cfg.ssl_trusted_ca_path, "/x/ca.crt");
    CHECK_EQ(cfg.paths_set, SW_CFG_SET_RUNTIME_DIR | SW_CFG_SET_LOG_DIR | SW_CFG_SET_CA_PATH);
    /* The last line counts: set, then emptied. */
    CHECK_EQ(load_text("p2.config", "swagent.runtime_dir=/x/run\nswagent.runtime_dir=\n"
                                    "logging.dir=/x/log\nlogging.dir=\n"),
             0);
    CHECK(!cfg.runtime_dir_explicit);
    CHECK_EQ(cfg.paths_set, 0u);
    CHECK_STR(cfg.runtime_dir, rt);
    CHECK_STR(cfg.log_dir, rt);
    /* From the environment (a key the file does not name). */
    setenv("SW_AGENT_RUNTIME_DIR", "/y/run", 1);
    CHECK_EQ(load_text("p3.config", "agent.service_name=p3\n"), 0);
    unsetenv("SW_AGENT_RUNTIME_DIR");
    CHECK(cfg.runtime_dir_explicit);
    CHECK_STR(cfg.runtime_dir, "/y/run");
    CHECK_STR(cfg.log_dir, "/y/run"); /* the log follows the runtime directory */
    /* A path longer than its slot is refused with a line; the default stays. */
    char text[SW_CFG_PATH_MAX + 64];
    int n = snprintf(text, sizeof(text), "swagent.runtime_dir=/");
    memset(text + n, 'a', SW_CFG_PATH_MAX);
    strcpy(text + n + SW_CFG_PATH_MAX, "\n");
    int before = log_count("value too long for swagent.runtime_dir");
    CHECK_EQ(load_text("p4.config", text), 0);
    CHECK_EQ(log_count("value too long for swagent.runtime_dir"), before + 1);
    CHECK_STR(cfg.runtime_dir, rt);
}

/* The agent's load leaves the default instance name to its activation (agent.c). */
static void test_instance_at_activation(void)
{
    static struct sw_config z; /* all zero, as the agent's static one */
    CHECK_EQ(sw_config_load_zeroed(&z, conf_path("nope.config"), NULL), -ENOENT);
    CHECK_STR(z.instance_name, "");
    sw_config_default_instance(&z);
    regex_t re;
    CHECK(regcomp(&re, "^[0-9a-f]{32}@[0-9]+\\.[0-9]+\\.[0-9]+\\.[0-9]+$", REG_EXTENDED) == 0);
    CHECK(regexec(&re, z.instance_name, 0, NULL, 0) == 0);
    regfree(&re);
    char first[SW_CFG_NAME_MAX];
    memcpy(first, z.instance_name, sizeof(first));
    sw_config_default_instance(&z); /* set: kept */
    CHECK_STR(z.instance_name, first);
    /* A configured name is never replaced. */
    static struct sw_config z2;
    CHECK_EQ(load_text("inst.config", "agent.instance_name=mine\n"), 0);
    CHECK_EQ(sw_config_load_zeroed(&z2, conf_path("inst.config"), NULL), 0);
    sw_config_default_instance(&z2);
    CHECK_STR(z2.instance_name, "mine");
}

static void test_long_file(void)
{
    size_t size = SW_CONFIG_FILE_MAX + 4096;
    char *text = malloc(size + 100);
    CHECK(text != NULL);
    memset(text, '#', size);
    for (size_t i = 79; i < size; i += 80)
        text[i] = '\n';
    strcpy(text + 80, "agent.service_name=early\n");
    text[80 + strlen("agent.service_name=early\n")] = '#';
    strcpy(text + size, "\nagent.service_name=late\n");
    CHECK_EQ(load_text("big.config", text), 0);
    free(text);
    CHECK_STR(cfg.service_name, "early");
    CHECK_EQ(log_count("longer than 65536 bytes"), 1);
}

/*
 * Without XDG_RUNTIME_DIR the rings go to memory: /dev/shm/swagent-<uid> (this machine's
 * /dev/shm is a large tmpfs; the test says so when it is not). /tmp was the default: a disk on
 * Debian 12, where the rings were written back as they filled. The spool's default stays on a
 * disk, in /tmp/swagent-<uid>.
 */
static void test_shm_default(void)
{
    char out[256], want[64];
    unsetenv("XDG_RUNTIME_DIR");
    CHECK_EQ(sw_config_default_runtime_dir(out, sizeof(out)), 0);
    if (shm_here()) {
        snprintf(want, sizeof(want), "/dev/shm/swagent-%u", (unsigned)geteuid());
        CHECK_STR(out, want);
        CHECK(sw_config_dir_in_shm(out));
    } else {
        printf("# /dev/shm is not a large tmpfs here: the default is %s\n", out);
        CHECK(!sw_config_dir_in_shm(out));
    }
    CHECK(sw_config_dir_in_shm("/dev/shm/x"));
    CHECK(!sw_config_dir_in_shm("/dev/shmx/y"));
    CHECK(!sw_config_dir_in_shm("/tmp/swagent-0"));
    CHECK(!sw_config_dir_in_shm("/dev/shm"));
    CHECK_EQ(sw_config_disk_dir(out, sizeof(out)), 0);
    snprintf(want, sizeof(want), "/tmp/swagent-%u", (unsigned)geteuid());
    CHECK_STR(out, want);
    struct stat st;
    CHECK(stat(out, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0700);
    CHECK_EQ(sw_config_disk_dir(out, 8), -ENAMETOOLONG);
}

int main(void)
{
    CHECK(mkdtemp(dir) != NULL);
    clean_env();
    char logdir[512];
    snprintf(logdir, sizeof(logdir), "%s/log", dir);
    CHECK_EQ(sw_log_open(logdir, "c.log", SW_LOG_DEBUG, 0), 0);
    RUN_TEST(test_defaults);
    RUN_TEST(test_missing_file);
    RUN_TEST(test_file_parse);
    RUN_TEST(test_placeholders);
    RUN_TEST(test_env_precedence);
    RUN_TEST(test_config_file_search);
    RUN_TEST(test_bad_values);
    RUN_TEST(test_refused_keys);
    RUN_TEST(test_log_capture);
    RUN_TEST(test_reporter_key);
    RUN_TEST(test_composition);
    RUN_TEST(test_lists);
    RUN_TEST(test_disable);
    RUN_TEST(test_runtime_and_reporter);
    RUN_TEST(test_long_file);
    RUN_TEST(test_paths_set);
    RUN_TEST(test_instance_at_activation);
    RUN_TEST(test_shm_default);
    sw_log_close();
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return 0;
}
