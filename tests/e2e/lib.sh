# lib.sh - shared helpers of the end-to-end tests (sourced by tests/e2e/*.sh and
# tests/interop/*.sh; bash).
#
# Rules: every test gets a private temp dir ($T), its own agent.config (SW_AGENT_CONFIG), its own
# runtime dir ($T/run, swagent.runtime_dir) and its own collector-stub on a kernel-chosen port.
# Every wait is bounded. Every process started here is recorded in PIDS (or is a reporter found
# through its log, or an nginx found through its pid file) and is stopped by PID in the EXIT
# trap. The checks read the collector-stub JSON lines ($T/seg.json, $T/mgmt.json) with jq.
#
# Environment (set by tests/e2e.cmake): SWAGENT_LIB (libswagent.so), SWAGENT_CLI (swagent),
# SWAGENT_REPORTER (swagent-reporter), COLLECTOR_STUB, E2E_DIR (this directory), BUILD_DIR.

set -u
E2E_NAME=${E2E_NAME:-e2e}
PIDS=""

# The current wall clock in epoch milliseconds.
now_ms() { date +%s%3N; }

e2e_cleanup() {
    local p alive i
    # Reporters started on demand by traced processes: their pids are in their logs.
    for f in $(find "$T" -name 'swagent-reporter*.log' 2>/dev/null); do
        for p in $(sed -n 's/.*reporter [0-9.]* started: pid \([0-9]*\),.*/\1/p' "$f"); do
            PIDS="$PIDS $p"
        done
    done
    for f in $(find "$T" -name '*.nginx.pid' 2>/dev/null); do
        PIDS="$PIDS $(cat "$f" 2>/dev/null)"
    done
    # Children of the processes started here (e.g. a server started through a wrapper) too.
    for p in $PIDS; do PIDS="$PIDS $(ps -o pid= --ppid "$p" 2>/dev/null | tr '\n' ' ')"; done
    for p in $PIDS; do kill "$p" 2>/dev/null; done
    i=0
    while [ $i -lt 30 ]; do
        alive=""
        for p in $PIDS; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ -z "$alive" ] && break
        sleep 0.1
        i=$((i + 1))
    done
    for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
    if [ -n "${E2E_KEEP:-}" ]; then
        echo "kept $T" >&2
    else
        rm -rf "$T"
    fi
}

# e2e_init: temp dir, agent.config, runtime dir, cleanup trap. Extra config lines on stdin
# are appended to agent.config when E2E_CONFIG_EXTRA is set.
e2e_init() {
    T=$(mktemp -d "${TMPDIR:-/tmp}/sw-e2e-$E2E_NAME.XXXXXX") || exit 1
    # Traversable by other users: nginx workers run as nobody when nginx starts as root.
    chmod 755 "$T"
    mkdir -m 700 "$T/run"
    trap e2e_cleanup EXIT
    trap 'exit 1' INT TERM
    unset LD_PRELOAD SW_AGENT_DISABLE SW_AGENT_NAME SW_AGENT_COLLECTOR_BACKEND_SERVICES \
        SW_AGENT_SAMPLE SW_AGENT_IGNORE_SUFFIX SW_AGENT_INSTANCE_NAME SW_AGENT_RUNTIME_DIR \
        SW_AGENT_REPORTER_PATH SW_LOGGING_DIR SW_AGENT_NAMESPACE SW_AGENT_CLUSTER \
        SW_PLUGIN_HTTP_INCLUDE_HTTP_HEADERS SW_AGENT_AUTHENTICATION SWAGENT_LIB_OVERRIDE
    write_config
    export SW_AGENT_CONFIG=$T/agent.config
    T_START=$(now_ms)
}

# write_config [extra lines...]: the test's agent.config. The service name and the collector
# come from the environment (SW_AGENT_NAME, SW_AGENT_COLLECTOR_BACKEND_SERVICES), as with
# `swagent run --service --collector`.
write_config() {
    {
        echo 'agent.service_name=${SW_AGENT_NAME:e2e-unnamed}'
        echo 'collector.backend_service=${SW_AGENT_COLLECTOR_BACKEND_SERVICES:127.0.0.1:1}'
        echo 'agent.sample_n_per_3_secs=${SW_AGENT_SAMPLE:-1}'
        echo 'collector.heartbeat_period=1'
        echo "swagent.runtime_dir=$T/run"
        echo "swagent.reporter_path=$SWAGENT_REPORTER"
        echo 'swagent.reporter_idle_exit=3'
        for l in "$@"; do echo "$l"; done
    } >"$T/agent.config"
}

fail() {
    echo "FAIL ($E2E_NAME): $*" >&2
    for f in "$T"/seg.json "$T"/mgmt.json "$T"/stub.err $(find "$T" -name '*.log' 2>/dev/null) \
        "$T"/*.out "$T"/*.err; do
        [ -s "$f" ] && { echo "--- $f (tail)" >&2; tail -n 40 "$f" >&2; }
    done
    exit 1
}

# wait_for 'shell condition' SECONDS
wait_for() {
    local n=0
    while ! eval "$1"; do
        n=$((n + 1))
        [ $n -gt $(($2 * 10)) ] && return 1
        sleep 0.1
    done
    return 0
}

lines() { if [ -f "$1" ]; then wc -l <"$1" | tr -d ' '; else echo 0; fi; }

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_stub: collector-stub on a free port; sets COLLECTOR (host:port) and exports it as the
# agent's backend.
start_stub() {
    # shellcheck disable=SC2086 # STUB_ARGS: extra options, word-split on purpose (cds.sh)
    "$COLLECTOR_STUB" --listen 127.0.0.1:0 --port-file "$T/stub.port" --segments "$T/seg.json" ${STUB_ARGS:-} \
        --management "$T/mgmt.json" 2>"$T/stub.err" &
    PIDS="$PIDS $!"
    STUB_PID=$!
    wait_for "[ -s '$T/stub.port' ]" 10 || fail "collector-stub did not start"
    COLLECTOR=127.0.0.1:$(cat "$T/stub.port")
    export SW_AGENT_COLLECTOR_BACKEND_SERVICES=$COLLECTOR
    : >>"$T/seg.json"
}

# traced SERVICE CMD...: runs CMD under the agent as service SERVICE.
traced() {
    local svc=$1
    shift
    env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME="$svc" "$@"
}

# start_orders_backend SERVICE: the nginx tests' backend, python3 -m http.server traced as
# SERVICE serving $T/www (api/orders.json holds '{"orders": [1, 2, 3]}'); sets PY to its port.
start_orders_backend() {
    mkdir -p "$T/www/api" "$T/ngx"
    echo '{"orders": [1, 2, 3]}' >"$T/www/api/orders.json"
    start_server py traced "$1" python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/www"
    PY=$PORT
}

# start_node_peer SERVICE INSTANCE COLLECTOR BACKEND_PORT: tests/interop/node_server.js traced by
# SkyWalking's Node.js agent (NODE_MODULES, INTEROP_DIR; not under LD_PRELOAD), reporting to
# COLLECTOR and forwarding to 127.0.0.1:BACKEND_PORT; sets NODE (its port) and NODE_PID.
start_node_peer() {
    start_server node env -u LD_PRELOAD NODE_PATH="$NODE_MODULES" SW_AGENT_NAME="$1" \
        SW_AGENT_INSTANCE="$2" SW_AGENT_COLLECTOR_BACKEND_SERVICES="$3" \
        BACKEND_PORT="$4" node "$INTEROP_DIR/node_server.js"
    NODE=$PORT NODE_PID=$LAST_PID
}

# nginx_conf HTTP_BLOCK [TOP-LEVEL LINES...]: writes $T/ngx/nginx.conf: the top-level lines
# (worker_processes, user), its pid file where e2e_cleanup finds it, its error log and temp paths
# in $T/ngx, no access log, NGINX_WORKER_CONNECTIONS (default 64), and HTTP_BLOCK (upstreams,
# servers) inside `http {}`.
nginx_conf() {
    local body=$1 l
    shift
    mkdir -p "$T/ngx"
    {
        for l in "$@"; do echo "$l"; done
        cat <<CONF
pid $T/ngx/x.nginx.pid;
error_log $T/ngx/error.log;
# Workers keep the sanitizers' options (log_path: scripts/test.sh) for reporters they start.
env ASAN_OPTIONS; env UBSAN_OPTIONS; env TSAN_OPTIONS;
events { worker_connections ${NGINX_WORKER_CONNECTIONS:-64}; }
http {
    access_log off;
    client_body_temp_path $T/ngx/body;
    proxy_temp_path $T/ngx/proxy;
    fastcgi_temp_path $T/ngx/fastcgi;
    uwsgi_temp_path $T/ngx/uwsgi;
    scgi_temp_path $T/ngx/scgi;
$body
}
CONF
    } >"$T/ngx/nginx.conf"
}

# nginx_proxy_conf PORT UPSTREAM_PORT [TOP-LEVEL LINES...]: nginx_conf for an nginx listening on
# 127.0.0.1:PORT that proxies everything to 127.0.0.1:UPSTREAM_PORT over HTTP/1.1.
nginx_proxy_conf() {
    local port=$1 up=$2
    shift 2
    nginx_conf "    server {
        listen 127.0.0.1:$port;
        location / {
            proxy_pass http://127.0.0.1:$up;
            proxy_http_version 1.1;
        }
    }" "$@"
}

# start_server NAME CMD...: runs CMD in the background (stdout to $T/NAME.out), waits until it
# prints its port ("PORT n" or python's "Serving HTTP on ... port n"); sets PORT and
# NAME_PID (in LAST_PID).
start_server() {
    local name=$1 i=0
    shift
    # `traced` is a shell function: run in the background it would be a subshell whose pid is
    # not the server's. Expand it here so that $! is the server itself (env execs it).
    if [ "$1" = traced ]; then
        set -- env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME="$2" "${@:3}"
    fi
    "$@" >"$T/$name.out" 2>"$T/$name.err" &
    LAST_PID=$!
    PIDS="$PIDS $LAST_PID"
    PORT=""
    while [ $i -lt 150 ]; do
        PORT=$(sed -n 's/^PORT \([0-9]*\)$/\1/p; s/^Serving HTTP on .* port \([0-9]*\) .*/\1/p' \
            "$T/$name.out" | head -n 1)
        [ -n "$PORT" ] && return 0
        kill -0 "$LAST_PID" 2>/dev/null || break
        i=$((i + 1))
        sleep 0.1
    done
    fail "$name did not start"
}

# burst_window PORT N PATH: N plain requests to 127.0.0.1:PORT, each on its own connection,
# inside one 3-second sampling window (burst.py); an attempt that crossed into the next window
# is set aside and made again, 3 times at most. SEG_FROM is set before each attempt, and
# BURST_BEFORE (a command, if set) is run too, so what is counted is the last attempt's.
burst_window() {
    local attempt rc
    for attempt in 1 2 3; do
        SEG_FROM=$(lines "$T/seg.json")
        [ -n "${BURST_BEFORE:-}" ] && eval "$BURST_BEFORE"
        python3 "$E2E_DIR/burst.py" "$1" "$2" "$3" >"$T/burst.out" 2>&1
        rc=$?
        [ $rc = 0 ] && return 0
        [ $rc = 3 ] || fail "burst failed ($rc): $(cat "$T/burst.out")"
        echo "attempt $attempt crossed a window boundary: again"
        sleep 3
    done
    fail "the burst of $2 never fitted in one 3 s window; machine too slow"
}

# wait_segments N [SECONDS]: waits until at least N segment lines arrived, then a little
# longer to catch extra (unexpected) ones.
# Only lines after the first SEG_FROM ones count (a test in several phases sets SEG_FROM).
SEG_FROM=0
wait_segments() {
    local want=$((SEG_FROM + $1))
    wait_for "[ \$(lines '$T/seg.json') -ge $want ]" "${2:-20}" ||
        fail "only $(($(lines "$T/seg.json") - SEG_FROM)) of $1 segments arrived"
    sleep "${SETTLE:-1.5}"
}

# check 'JQ EXPR over the slurped segments ($s, those after SEG_FROM)' 'what it means' [FILE]: fails unless the
# expression yields true. Handy variables in EXPR: $s (all segments), $t0 / $t1 (the test's
# wall clock window in ms).
check() {
    local f=${3:-$T/seg.json}
    T_END=${T_END:-$(now_ms)}
    if [ "$f" = "$T/seg.json" ] && [ "$SEG_FROM" -gt 0 ]; then
        tail -n +$((SEG_FROM + 1)) "$T/seg.json" >"$T/seg.view"
        f=$T/seg.view
    fi
    jq -e -s --argjson t0 "$T_START" --argjson t1 "$T_END" ". as \$s | $1" "$f" >/dev/null 2>"$T/jq.err" ||
        fail "$2 [jq: $1] $(cat "$T/jq.err")"
}

# Common jq definitions, prepended to expressions with "$JQDEFS".
JQDEFS='
def seg(svc): [$s[] | select(.service == svc)];
def sane_times: (.startTime | tonumber) as $a | (.endTime | tonumber) as $b
    | $a >= $t0 and $b <= $t1 and $b >= $a;
def tag(k): [.tags[] | select(.key == k) | .value] | if length == 1 then .[0] else null end;
def http_span(op; status): .spanLayer == "Http" and .componentId == 49 and .operationName == op
    and tag("http.method") == (op | split(":")[0]) and tag("http.status_code") == status
    and (tag("url") | type) == "string" and .isError == ((status | tonumber) >= 400);
def root0: .spans | map(select(.spanId == 0 and .parentSpanId == -1)) | length == 1;
def links(child; parent; span):
    (child.spans[0].refs | length) == 1 and
    (child.spans[0].refs[0] as $r |
        $r.refType == "CrossProcess" and $r.traceId == parent.traceId
        and $r.parentTraceSegmentId == parent.traceSegmentId
        and $r.parentSpanId == span.spanId and $r.parentService == parent.service
        and $r.parentServiceInstance == parent.serviceInstance
        and $r.parentEndpoint == ([parent.spans[] | select(.spanType == "Entry")]
            | if length > 0 then .[0].operationName else (parent.spans | map(select(.spanId == 0))[0].operationName) end)
        and $r.networkAddressUsedAtPeer == span.peer);
'

# stat_nice FILE / stat_policy FILE: the nice value (field 19) and the scheduling policy (field
# 41; 0 normal, 5 SCHED_IDLE) of a /proc/<pid>[/task/<tid>]/stat file.
stat_nice() { awk '{sub(/.*\) /, ""); print $17}' "$1"; }
stat_policy() { awk '{sub(/.*\) /, ""); print $39}' "$1"; }

# check_reporter_sched PID POLICY NICE: every thread of the reporter (gRPC's included, so at
# least two) runs with that policy and nice value.
check_reporter_sched() {
    local pid=$1 policy=$2 nice=$3 task n=0
    for task in /proc/"$pid"/task/*; do
        [ "$(stat_policy "$task/stat")" = "$policy" ] ||
            fail "reporter thread ${task##*/}: policy $(stat_policy "$task/stat"), expected $policy"
        [ "$(stat_nice "$task/stat")" = "$nice" ] ||
            fail "reporter thread ${task##*/}: nice $(stat_nice "$task/stat"), expected $nice"
        n=$((n + 1))
    done
    [ $n -gt 1 ] || fail "expected the reporter's gRPC threads too ($n thread)"
}

# reporter_pid: the pid of the running reporter of this test's runtime dir ("" if none).
reporter_pid() {
    "$SWAGENT_CLI" status --runtime-dir "$T/run" 2>/dev/null |
        sed -n 's/^ *pid=\([0-9]*\) collector=.*/\1/p' | head -1
}
