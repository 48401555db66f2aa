/*
 * main.c - collector-stub command line: an OAP-compatible gRPC collector for tests and demos.
 *
 *   collector-stub [--listen HOST:PORT] [--segments FILE] [--management FILE] [--meters FILE]
 *                  [--auth TOKEN] [--port-file FILE] [--discard] [--no-sync]
 *                  [--fail-calls FROM[-[TO]]] [--max-message BYTES [--java-wording]]
 *                  [--cds FILE] [--logs FILE]
 *                  [--profile-task SPEC]... [--profile FILE]
 *   collector-stub tree ARGS...      (the tree-client's command, collector-stub/tree.c)
 *   collector-stub profile FILE [--segment ID]   (profile trees, collector-stub/profile.c)
 *
 * Rules: this file only parses options, opens the output files and installs the signal
 * handlers; the server lives in server.c and the JSON format in json.c. SIGTERM and SIGINT
 * stop the server cleanly (exit 0 with every received message written).
 */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile.h"
#include "server.h"

#if __has_include("tree.h")
#include "tree.h"
#endif

/* Defined by tree.c when it is built; weak so the stub links without it. */
int sw_stub_tree_main(int argc, char **argv) __attribute__((weak));

static void usage(FILE *f)
{
    fputs("usage: collector-stub [--listen HOST:PORT] [--segments FILE] [--management FILE]\n"
          "                      [--meters FILE] [--logs FILE]\n"
          "                      [--auth TOKEN] [--port-file FILE]\n"
          "                      [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]]\n"
          "                      [--discard] [--no-sync] [--fail-calls FROM[-[TO]]]\n"
          "                      [--max-message BYTES [--java-wording]] [--cds FILE]\n"
          "                      [--max-message BYTES [--java-wording]]\n"
          "                      [--profile-task SPEC]... [--profile FILE]\n"
          "       collector-stub tree ARGS...\n"
          "       collector-stub profile FILE [--segment ID]\n"
          "  --listen     address to serve gRPC on (default 127.0.0.1:11800; port 0 = any free)\n"
          "  --segments   one JSON line per received SegmentObject (default - = stdout)\n"
          "  --management one JSON line per management / CDS call (default: not written)\n"
          "  --meters     one JSON line per MeterDataCollection / MeterData (MeterReportService;\n"
          "               default: with the management calls)\n"
          "  --logs       one JSON line per LogData (LogReportService/collect; default: with\n"
          "               the management calls)\n"
          "  --auth       require metadata `authentication: TOKEN` (else PERMISSION_DENIED)\n"
          "  --port-file  write the bound port (decimal + newline) to FILE once listening\n"
          "  --tls-cert, --tls-key  serve TLS with this PEM certificate chain and key\n"
          "  --tls-client-ca        require client certificates signed by this PEM CA (mTLS)\n"
          "  --discard    parse and count segments only (no JSON; totals on stderr at exit)\n"
          "  --no-sync    answer UNIMPLEMENTED for collectInSync (as an OAP without it)\n"
          "  --cds FILE   answer fetchConfigurations from FILE's key=value lines (OAP's UUID\n"
          "               rules; read at every call; a line !garbage answers garbage)\n"
          "  --fail-calls answer UNAVAILABLE to the segment messages numbered FROM to TO\n"
          "               (FROM alone: that one; FROM-: all from FROM on), counting only\n"
          "               messages of at least one byte (empty probes are answered OK)\n"
          "  --max-message answer RESOURCE_EXHAUSTED to a message larger than BYTES as\n"
          "               received or inflated (gRPC's \"Received message larger than max\")\n"
          "  --java-wording  word that refusal as grpc-java (the OAP's server) does:\n"
          "               \"gRPC message exceeds maximum size BYTES: N\"\n"
          "  --profile-task  hand out a ProfileTask: KEY=VALUE,... of its command args\n"
          "               (EndpointName, MinDurationThreshold, DumpPeriod, MaxSamplingCount,\n"
          "               Duration, ...), service=NAME, start=+MS (collector-stub/profile.h)\n"
          "  --profile    one JSON line per ThreadSnapshot, task poll and task end\n",
          f);
}

/* FROM, FROM-TO or FROM- (to the end), FROM >= 1. */
static bool parse_range(const char *s, unsigned long *from, unsigned long *to)
{
    char *end;

    if (*s < '0' || *s > '9')
        return false;
    errno = 0;
    *from = strtoul(s, &end, 10);
    if (errno || *from == 0)
        return false;
    if (*end == '\0') {
        *to = *from;
        return true;
    }
    if (*end != '-')
        return false;
    if (end[1] == '\0') {
        *to = ULONG_MAX;
        return true;
    }
    s = end + 1;
    if (*s < '0' || *s > '9')
        return false;
    *to = strtoul(s, &end, 10);
    return errno == 0 && *end == '\0' && *to >= *from;
}

static void on_signal(int sig)
{
    sw_stub_server_request_stop();
}

/* "-" is stdout; anything else is created or truncated. Output is line-buffered by hand. */
static FILE *open_out(const char *path)
{
    if (strcmp(path, "-") == 0)
        return stdout;
    FILE *f = fopen(path, "w");
    if (!f)
        fprintf(stderr, "collector-stub: cannot open %s: %s\n", path, strerror(errno));
    return f;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "profile") == 0)
        return sw_stub_profile_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "tree") == 0) {
        if (!sw_stub_tree_main) {
            fputs("tree: not built\n", stderr);
            return 2;
        }
        return sw_stub_tree_main(argc - 1, argv + 1);
    }

    static const struct option longopts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"segments", required_argument, NULL, 's'},
        {"management", required_argument, NULL, 'm'},
        {"meters", required_argument, NULL, 'M'},
        {"logs", required_argument, NULL, 'L'},
        {"auth", required_argument, NULL, 'a'},
        {"port-file", required_argument, NULL, 'p'},
        {"tls-cert", required_argument, NULL, 'C'},
        {"tls-key", required_argument, NULL, 'K'},
        {"tls-client-ca", required_argument, NULL, 'A'},
        {"discard", no_argument, NULL, 'D'},
        {"no-sync", no_argument, NULL, 'N'},
        {"fail-calls", required_argument, NULL, 'F'},
        {"max-message", required_argument, NULL, 'X'},
        {"java-wording", no_argument, NULL, 'J'},
        {"cds", required_argument, NULL, 'S'},
        {"profile-task", required_argument, NULL, 'T'},
        {"profile", required_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct sw_stub_options opt = {.listen = "127.0.0.1:11800"};
    const char *segments = "-", *management = NULL, *profile = NULL, *meters = NULL, *logs = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "l:s:m:a:p:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'l':
            opt.listen = optarg;
            break;
        case 's':
            segments = optarg;
            break;
        case 'm':
            management = optarg;
            break;
        case 'M':
            meters = optarg;
            break;
        case 'L':
            logs = optarg;
            break;
        case 'a':
            opt.auth = optarg;
            break;
        case 'p':
            opt.port_file = optarg;
            break;
        case 'C':
            opt.tls_cert = optarg;
            break;
        case 'K':
            opt.tls_key = optarg;
            break;
        case 'A':
            opt.tls_client_ca = optarg;
            break;
        case 'D':
            opt.discard = true;
            break;
        case 'N':
            opt.no_sync = true;
            break;
        case 'J':
            opt.java_wording = true;
            break;
        case 'S':
            opt.cds_file = optarg;
            break;
        case 'T':
            if (sw_stub_prof_add(optarg) != 0)
                return 2;
            break;
        case 'P':
            profile = optarg;
            break;
        case 'F':
            if (!parse_range(optarg, &opt.fail_from, &opt.fail_to)) {
                fprintf(stderr,
                        "collector-stub: --fail-calls wants FROM, FROM-TO or FROM- "
                        "(numbers from 1), not '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'X': {
            char *end;
            errno = 0;
            unsigned long v = strtoul(optarg, &end, 10);
            if (errno || *end || end == optarg || v == 0 || optarg[0] == '-') {
                fprintf(stderr, "collector-stub: --max-message wants a byte count > 0, not '%s'\n",
                        optarg);
                return 2;
            }
            opt.max_message = v;
            break;
        }
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }
    opt.segments = open_out(segments);
    if (!opt.segments)
        return 1;
    if (management) {
        opt.management = open_out(management);
        if (!opt.management)
            return 1;
    }
    if (meters) {
        opt.meters = open_out(meters);
        if (!opt.meters)
            return 1;
    }
    if (logs) {
        opt.logs = open_out(logs);
        if (!opt.logs)
            return 1;
    }

    if (profile) {
        opt.profile = open_out(profile);
        if (!opt.profile)
            return 1;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    int rc = sw_stub_server_run(&opt);
    if (opt.management && opt.management != stdout)
        fclose(opt.management);
    if (opt.profile && opt.profile != stdout)
        fclose(opt.profile);
    if (opt.meters && opt.meters != stdout)
        fclose(opt.meters);
    if (opt.logs && opt.logs != stdout)
        fclose(opt.logs);
    if (opt.segments != stdout)
        fclose(opt.segments);
    else
        fflush(stdout);
    return rc == 0 ? 0 : 1;
}
