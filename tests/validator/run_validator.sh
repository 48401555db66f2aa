#!/usr/bin/env bash
# run_validator.sh - ctest validator_swagent: swagent's real output judged by an independent
# OAP stand-in (oap_validator.js, built from SkyWalking's own generated schema code).
#
#   curl (traced) -> nginx (traced reverse proxy, 2 workers) -> python3 -m http.server (traced)
#
# Traffic: one 200, one 404, a keep-alive pair (two URLs on one curl connection) and one request
# from an untraced client carrying a malformed sw8 (7 fields): 3 + 3 + 6 + 2 = 14 segments in
# 1 + 1 + 2 + 1 = 5 traces. Then error and edge cases: a refused connect (1 segment), nginx to a
# dead upstream (502; 2), a POST answered 501 (3), a HEAD (3), a 300-char path (404; 3), a
# Host header naming another host (3): 15 segments in 6 traces. CGI: curl (traced) -> python3
# -m http.server --cgi (traced) forks and execs cgi-bin/call.sh, whose curl (traced, its own
# service name) calls the python backend: 4 segments in 1 trace, the CGI server's EXEC exit
# span being the parent of the CGI curl's EXEC entry. Expected: 33 segments, 12
# traces, every segment free of violations of OAP's analysis rules, every ref linked to the
# parent exit span (peer byte-equal, same status), every exit span referred to by exactly one
# child (except the two towards the dead port), messages gzip-compressed (the reporter's
# default), InstanceProperties with `language`. The test fails if the validator receives
# nothing.
#
# Everything listens on 127.0.0.1 on kernel-chosen ports; every wait is bounded; every process
# started here (validator, python, nginx, reporters) is stopped by PID in the EXIT trap.
# Environment (tests/validator.cmake): SWAGENT_CLI, SWAGENT_REPORTER, VALIDATOR_DIR (this
# directory), NODE_MODULES (the fixture's node_modules). SW_VALIDATOR_KEEP=1 keeps the temp dir.
set -u
for v in SWAGENT_CLI SWAGENT_REPORTER VALIDATOR_DIR NODE_MODULES; do
    [ -n "${!v:-}" ] || { echo "FAIL: $v not set (run through ctest)" >&2; exit 1; }
done
command -v node >/dev/null || { echo "FAIL: node is not installed" >&2; exit 1; }
command -v nginx >/dev/null || { echo "FAIL: nginx is not installed" >&2; exit 1; }
[ -f "$NODE_MODULES/skywalking-backend-js/package.json" ] ||
    { echo "FAIL: $NODE_MODULES has no skywalking-backend-js (fixture validator_npm_install)" >&2; exit 1; }

T=$(mktemp -d "${TMPDIR:-/tmp}/sw-validator.XXXXXX") || exit 1
# Traversable by nginx workers when they drop privileges.
chmod 755 "$T"
mkdir -m 700 "$T/run"
mkdir -p "$T/www/api" "$T/ngx" "$T/oap"
PIDS=""

cleanup() {
    local p alive i f
    for f in $(find "$T" -name 'swagent-reporter*.log' 2>/dev/null); do
        for p in $(sed -n 's/.*reporter [0-9.]* started: pid \([0-9]*\),.*/\1/p' "$f"); do
            PIDS="$PIDS $p"
        done
    done
    [ -f "$T/ngx/nginx.pid" ] && PIDS="$PIDS $(cat "$T/ngx/nginx.pid" 2>/dev/null)"
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
    if [ -n "${SW_VALIDATOR_KEEP:-}" ]; then echo "kept $T" >&2; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
    echo "FAIL (validator): $*" >&2
    for f in "$T"/oap.err "$T"/oap/violations.jsonl "$T"/ngx/error.log "$T"/*.out \
        $(find "$T/run" -name '*.log' 2>/dev/null); do
        [ -s "$f" ] && { echo "--- $f (tail)" >&2; tail -n 30 "$f" >&2; }
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
}
lines() { if [ -f "$1" ]; then wc -l <"$1" | tr -d ' '; else echo 0; fi; }
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
now_ms() { date +%s%3N; }

unset LD_PRELOAD SW_AGENT_DISABLE SW_AGENT_NAME SW_AGENT_COLLECTOR_BACKEND_SERVICES \
    SW_AGENT_SAMPLE SW_AGENT_IGNORE_SUFFIX SW_AGENT_INSTANCE_NAME SW_AGENT_RUNTIME_DIR \
    SW_AGENT_REPORTER_PATH SW_LOGGING_DIR SW_AGENT_NAMESPACE SW_AGENT_CLUSTER \
    SW_PLUGIN_HTTP_INCLUDE_HTTP_HEADERS SW_AGENT_AUTHENTICATION
export NODE_PATH=$NODE_MODULES
T0=$(now_ms)

# 1. The OAP stand-in.
node "$VALIDATOR_DIR/oap_validator.js" serve --out "$T/oap" --port-file "$T/oap.port" \
    >"$T/oap.out" 2>"$T/oap.err" &
PIDS="$PIDS $!"
wait_for "[ -s '$T/oap.port' ]" 20 || fail "oap_validator did not start"
COLLECTOR=127.0.0.1:$(cat "$T/oap.port")
echo "oap_validator listening on $COLLECTOR"

# 2. The agent's config: only this test's runtime dir and reporter; gzip left at its default.
cat >"$T/agent.config" <<CFG
agent.sample_n_per_3_secs=-1
collector.heartbeat_period=1
swagent.reporter_idle_exit=3
swagent.runtime_dir=$T/run
swagent.reporter_path=$SWAGENT_REPORTER
CFG
export SW_AGENT_CONFIG=$T/agent.config
SW="$SWAGENT_CLI run --collector $COLLECTOR --config $T/agent.config"

# 3. python backend (port chosen by the kernel, read from its banner).
echo '{"orders": [1, 2, 3]}' >"$T/www/api/orders.json"
echo 'second' >"$T/www/api/second.txt"
$SW --service validator-python -- python3 -u -m http.server 0 --bind 127.0.0.1 \
    --directory "$T/www" >"$T/python.out" 2>"$T/python.err" &
PIDS="$PIDS $!"
wait_for "grep -q 'port [0-9]' '$T/python.out' 2>/dev/null" 15 || fail "python http.server did not start"
PY=$(sed -n 's/^Serving HTTP on .* port \([0-9]*\) .*/\1/p' "$T/python.out" | head -n 1)
[ -n "$PY" ] || fail "no python port"

# 4. nginx, master + 2 workers; /dead/ goes to a port where nothing listens.
NG=$(free_port)
DEAD=$(free_port)
cat >"$T/ngx/nginx.conf" <<CONF
worker_processes 2;
# Workers keep the sanitizers' options (log_path: scripts/test.sh) for reporters they start.
env ASAN_OPTIONS; env UBSAN_OPTIONS; env TSAN_OPTIONS;
pid $T/ngx/nginx.pid;
error_log $T/ngx/error.log;
$( [ "$(id -u)" -eq 0 ] && echo "user root;" )
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path $T/ngx/body;
    proxy_temp_path $T/ngx/proxy;
    fastcgi_temp_path $T/ngx/fastcgi;
    uwsgi_temp_path $T/ngx/uwsgi;
    scgi_temp_path $T/ngx/scgi;
    server {
        listen 127.0.0.1:$NG;
        keepalive_timeout 10;
        location /dead/ {
            proxy_pass http://127.0.0.1:$DEAD;
        }
        location / {
            proxy_pass http://127.0.0.1:$PY;
            proxy_http_version 1.1;
        }
    }
}
CONF
$SW --service validator-nginx -- nginx -c "$T/ngx/nginx.conf" -p "$T/ngx" -g 'daemon off;' \
    >"$T/nginx.out" 2>&1 &
PIDS="$PIDS $!"
# A bare connect sends no HTTP, so it makes no span.
wait_for "(exec 3<>/dev/tcp/127.0.0.1/$NG) 2>/dev/null" 15 || fail "nginx did not start"
URL=http://127.0.0.1:$NG

# 4b. A CGI server: python's CGI handler forks (the child drops to nobody when root) and execs
# the script; the script's curl gets SW_AGENT_PARENT_CTX and joins the request's trace.
mkdir -p "$T/cgi/cgi-bin"
cat >"$T/cgi/cgi-bin/call.sh" <<CGI
#!/bin/sh
echo "Content-Type: text/plain"
echo
SW_AGENT_NAME=validator-cgi-curl curl -sS --max-time 10 "http://127.0.0.1:$PY/api/second.txt"
CGI
chmod -R a+rX "$T/cgi"
chmod 755 "$T/cgi/cgi-bin/call.sh"
(cd "$T/cgi" && exec $SW --service validator-cgi -- python3 -u -m http.server --cgi 0 \
    --bind 127.0.0.1) >"$T/cgi.out" 2>"$T/cgi.err" &
PIDS="$PIDS $!"
wait_for "grep -q 'port [0-9]' '$T/cgi.out' 2>/dev/null" 15 || fail "python CGI server did not start"
CGIP=$(sed -n 's/^Serving HTTP on .* port \([0-9]*\) .*/\1/p' "$T/cgi.out" | head -n 1)
[ -n "$CGIP" ] || fail "no CGI server port"

# 5. Traffic.
body=$($SW --service validator-curl -- curl -sS --max-time 10 "$URL/api/orders.json") ||
    fail "curl 200 failed"
[ "$body" = '{"orders": [1, 2, 3]}' ] || fail "body changed: $body"
code=$($SW --service validator-curl -- curl -s --max-time 10 -o /dev/null -w '%{http_code}' \
    "$URL/api/missing") || true
[ "$code" = 404 ] || fail "expected 404, got '$code'"
# Keep-alive pair: two URLs on one connection (curl reports 1 then 0 new connections).
ka=$($SW --service validator-curl -- curl -sS --max-time 10 -o /dev/null -o /dev/null \
    -w '%{http_code}/%{num_connects} ' "$URL/api/orders.json" "$URL/api/second.txt") ||
    fail "keep-alive curl failed"
[ "$ka" = "200/1 200/0 " ] || fail "keep-alive pair: expected '200/1 200/0 ', got '$ka'"
# Malformed sw8 (7 fields) from an untraced client: nginx must start a new trace.
BAD_TRACE=TWFsZm9ybWVkVHJhY2U=   # base64("MalformedTrace")
code=$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' \
    -H "sw8: 1-$BAD_TRACE-U2VnbWVudA==-1-c3Zj-aW5zdA==-R0VUOi8=" "$URL/api/orders.json") || true
[ "$code" = 200 ] || fail "malformed sw8 request: expected 200, got '$code'"

# Errors and edge cases.
tc() { $SW --service validator-curl -- curl -s --max-time 10 -o /dev/null -w '%{http_code}' "$@"; }
code=$(tc "http://127.0.0.1:$DEAD/refused")
[ "$code" = 000 ] || fail "refused connect: expected 000, got '$code'"
code=$(tc "$URL/dead/x")
[ "$code" = 502 ] || fail "dead upstream: expected 502, got '$code'"
code=$(tc -d 'a=1' "$URL/api/post?q=1")
[ "$code" = 501 ] || fail "POST: expected 501, got '$code'"
code=$(tc -I "$URL/api/orders.json")
[ "$code" = 200 ] || fail "HEAD: expected 200, got '$code'"
LONG=$(printf 'a%.0s' $(seq 300))
code=$(tc "$URL/$LONG?x=y")
[ "$code" = 404 ] || fail "long path: expected 404, got '$code'"
code=$(tc -H 'Host: example.com' "$URL/api/orders.json")
[ "$code" = 200 ] || fail "Host header: expected 200, got '$code'"
body=$($SW --service validator-curl -- curl -sS --max-time 10 "http://127.0.0.1:$CGIP/cgi-bin/call.sh") ||
    fail "CGI request failed"
[ "$body" = second ] || fail "CGI body: '$body'"

# 6. Wait for all 33 segments (bounded), then a little longer for unexpected extra ones, and
# for at least one InstanceProperties.
SEG=$T/oap/segments.jsonl
NSEG=33
wait_for "[ \$(lines '$SEG') -ge $NSEG ]" 30 ||
    fail "only $(lines "$SEG") of $NSEG segments arrived"
wait_for "grep -q reportInstanceProperties '$T/oap/management.jsonl'" 10 ||
    fail "no reportInstanceProperties arrived"
sleep 2
T1=$(now_ms)
echo "segments received: $(lines "$SEG"), management messages: $(lines "$T/oap/management.jsonl")"

# 7. The validator's verdict: per-segment rules, cross-segment links, expectations.
# --same-clock --clock-slack 0: every process stamps a callee's entry start after its read and
# its end before its last write, a caller's exit start before its write and its end after its
# read, so on one host each callee entry lies within its caller's exit (ms floors keep order).
node "$VALIDATOR_DIR/oap_validator.js" check --out "$T/oap" --expect-segments $NSEG \
    --expect-traces 12 --require-parents --strict-links --dead-peers "127.0.0.1:$DEAD" \
    --same-clock --clock-slack 0 \
    --require-gzip --require-properties --t0 "$T0" --t1 "$T1" ||
    fail "oap_validator check failed (violations above)"

# 8. Scenario facts the generic rules cannot know (jq over the decoded segments).
jqcheck() { # [--arg NAME VALUE] FILTER WHAT
    local args=()
    [ "$1" = --arg ] && { args=(--arg "$2" "$3"); shift 3; }
    jq -e -s "${args[@]}" "$1" "$SEG" >/dev/null 2>"$T/jq.err" ||
        fail "$2 [jq: $1] $(cat "$T/jq.err")"
}
jqcheck '[.[].segment.spansList[] | select(.operationname == "GET:/api/missing")
    | select(any(.tagsList[]; .key == "http.status_code" and .value == "404"))]
    | length == 4 and all(.iserror)' \
    "the 404 is on curl's exit, nginx's entry and exit and python's entry, all isError"
jqcheck '[.[].segment.spansList[] | select(.operationname == "POST:/api/post")
    | select(any(.tagsList[]; .key == "http.status_code" and .value == "501"))]
    | length == 4 and all(.iserror)' "the POST's 501 on all four spans, all isError"
jqcheck '[.[].segment.spansList[] | select(.operationname == "HEAD:/api/orders.json")
    | select(any(.tagsList[]; .key == "http.status_code" and .value == "200"))]
    | length == 4 and all(.iserror | not)' "the HEAD on all four spans"
jqcheck '[.[].segment.spansList[] | select(.operationname | startswith("GET:/aaaa"))
    | .operationname | length] | length == 4 and all(. <= 150)' \
    "the long path's operation names are cut to at most 150 chars"
jqcheck --arg dead "127.0.0.1:$DEAD" '[.[].segment.spansList[] | select(.peer == $dead)]
    | length == 2 and all(.iserror and .spantype == 1 and any(.logsList[].dataList[];
        .key == "event" and .value == "error"))' \
    "the two exits to the dead port (curl's, nginx's) are errors with an error log"
jqcheck '[.[].segment.spansList[] | select(.spantype == 0 and (.operationname == "GET:/dead/x"))
    | select(any(.tagsList[]; .key == "http.status_code" and .value == "502"))]
    | length == 1 and all(.iserror)' "nginx's entry of the dead upstream is a 502 error"
jqcheck '[.[].segment.spansList[] | select(.peer == "example.com:80")] | length == 1' \
    "the Host header gives curl's exit peer example.com:80 (linked to nginx by the check)"
jqcheck '[.[].segment | select(.traceid | test("Malformed"))] | length == 0' \
    "the malformed sw8's trace id was not adopted"
jqcheck '[.[].segment | select(.service == "validator-nginx" and
    all(.spansList[]; (.refsList | length) == 0))] | length == 1' \
    "exactly one nginx segment (the malformed sw8 one) has no ref"
jqcheck '[.[].segment | select(.service == "validator-curl")] | length == 11' "11 curl segments"
jqcheck '[.[].segment | select(.service == "validator-cgi") | .spansList[]
    | select(.spantype == 1 and .operationname == "EXEC:call.sh" and .peer == "exec:call.sh"
        and .parentspanid == 0)] | length == 1' \
    "the CGI server's segment has one Exit span EXEC:call.sh with peer exec:call.sh"
jqcheck '[.[].segment | select(.service == "validator-cgi") | .spansList[]
    | select(.spantype == 0 and (.iserror | not)
        and any(.tagsList[]; .key == "http.status_code" and .value == "200"))] | length == 1' \
    "the CGI server's entry ends with the status 200 of the status line it wrote"
jqcheck '[.[].segment | select(.service == "validator-cgi-curl") | .spansList[]
    | select(.spantype == 0 and .operationname == "EXEC:curl"
        and .refsList[0].networkaddressusedatpeer == "exec:call.sh")] | length == 1' \
    "the CGI curl's segment starts with EXEC:curl, its ref naming exec:call.sh"
jqcheck '[.[] | select(.encoding != "gzip")] | length == 0' "every segment came on a gzip call"

# 9. The verdict can fail on this very data: each mutation of one real segment (as an agent bug
# would make it) must be flagged with its rule.
mutate() { # NAME RULE SELECT FILTER: FILTER applied to the first record matching SELECT
    local name=$1 rule=$2 sel=$3 f=$4 d=$T/mut-$1
    mkdir -p "$d"
    cp "$T/oap/management.jsonl" "$T/oap/calls.jsonl" "$d/"
    jq -c -s "(map($sel) | index(true)) as \$i | to_entries
        | map(if .key == \$i then (.value | $f) else .value end) | .[]" "$SEG" \
        >"$d/segments.jsonl" || fail "mutation $name: jq failed"
    cmp -s "$d/segments.jsonl" "$SEG" && fail "mutation $name changed nothing"
    node "$VALIDATOR_DIR/oap_validator.js" check --out "$d" --require-parents --strict-links \
        --dead-peers "127.0.0.1:$DEAD" >"$d/out" 2>&1 && fail "mutation $name ($rule) was not flagged"
    grep -q "^ERROR $rule:" "$d/out" || fail "mutation $name: no $rule in $(cat "$d/out")"
    echo "ok mutation $name flagged: $rule"
}
NGX_EXIT='.segment.service == "validator-nginx" and any(.segment.spansList[]; .spantype == 1)'
mutate peer peer-mismatch "$NGX_EXIT" \
    '.segment.spansList |= map(if .spantype == 1 then .peer = "localhost:" + (.peer | split(":")[1]) else . end)'
mutate micros time-unit '.segment.service == "validator-python"' \
    '.segment.spansList[0].starttime *= 1000 | .segment.spansList[0].endtime *= 1000'
mutate span0 no-span0 '.segment.service == "validator-python"' '.segment.spansList[0].spanid = 3'
mutate refexit ref-not-entry "$NGX_EXIT" \
    '.segment.spansList |= map(if .spantype == 1 then .refsList = (.refsList + [{reftype: 0,
        traceid: "x", parenttracesegmentid: "y", parentspanid: 0, parentservice: "a",
        parentserviceinstance: "b", parentendpoint: "c", networkaddressusedatpeer: "d:1"}]) else . end)'
mutate endpoint parent-endpoint '.segment.service == "validator-python"' \
    '.segment.spansList[0].refsList[0].parentendpoint = "GET:/elsewhere"'
mutate status is-error '.segment.service == "validator-python"' \
    '.segment.spansList[0].iserror = (.segment.spansList[0].iserror | not)'
mutate callee-status status-disagree '.segment.service == "validator-python"' \
    '.segment.spansList[0].tagsList |= map(if .key == "http.status_code" then .value = "299" else . end)'
echo "ok validator: $NSEG segments, 12 traces, 0 violations, all refs linked"
