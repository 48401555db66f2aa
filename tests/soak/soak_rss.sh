#!/bin/sh
# soak_rss.sh - RSS of a traced server stays flat over many requests (tests/hardening.cmake).
#
# nginx (master + 1 worker, under the agent) serves a small static file; wrk (keep-alive,
# loopback) makes SW_SOAK_REQUESTS requests (default 100000) in rounds, with swagent-reporter
# and collector-stub running. After a warm-up round, the worker's RSS may grow by less than
# SW_SOAK_RSS_KIB (1024 KiB) over the rest. Every request is sampled: the worker's ring
# accounts for each request wrk and the start-up probes saw (committed + shed, none dropped),
# and every committed segment reaches the collector exactly once.
# Environment: SWAGENT_LIB, REPORTER, STUB, SWAGENT_CLI; optional SW_TEST_PRELOAD (see
# scripts/test.sh).
set -eu
work=$(mktemp -d "${TMPDIR:-/tmp}/swagent-soak.XXXXXX")
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    for p in $pids; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "FAIL (soak): $*" >&2
    for f in "$work"/*.err "$work"/ngx/error.log; do
        [ -s "$f" ] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }
    done
    exit 1
}
wait_for() {
    i=0
    while ! eval "$1"; do
        i=$((i + 1))
        [ "$i" -lt "$2" ] || return 1
        sleep 0.1
    done
}
command -v nginx > /dev/null || { echo "SKIP: nginx not installed"; exit 77; }
command -v wrk > /dev/null || { echo "SKIP: wrk not installed"; exit 77; }

total=${SW_SOAK_REQUESTS:-100000}
limit=${SW_SOAK_RSS_KIB:-1024}
RUN="$work/run"
mkdir -p -m 700 "$RUN" "$work/log"
export SW_AGENT_RUNTIME_DIR="$RUN" SW_LOGGING_DIR="$work/log" SW_AGENT_NAME=soak SW_AGENT_SAMPLE=-1
export SW_AGENT_REPORTER_PATH="$REPORTER"
"$STUB" --listen 127.0.0.1:0 --port-file "$work/stub.port" --segments "$work/seg.json" \
    2> "$work/stub.err" &
pids="$pids $!"
wait_for "[ -s '$work/stub.port' ]" 100 || fail "collector-stub did not start"
export SW_AGENT_COLLECTOR_BACKEND_SERVICES="127.0.0.1:$(cat "$work/stub.port")"
"$REPORTER" --foreground --runtime-dir "$RUN" --collector "$SW_AGENT_COLLECTOR_BACKEND_SERVICES" \
    2> "$work/reporter.err" &
pids="$pids $!"

nport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$work/ngx/tmp" "$work/ngx/www"
echo "soak test page" > "$work/ngx/www/index.html"
user=""; [ "$(id -u)" = 0 ] && user="user root;"
cat > "$work/ngx/nginx.conf" <<NGX
$user
daemon off;
master_process on;
worker_processes 1;
# Workers keep the sanitizers' options (log_path: scripts/test.sh) for reporters they start.
env ASAN_OPTIONS; env UBSAN_OPTIONS; env TSAN_OPTIONS;
pid $work/ngx/nginx.pid;
error_log $work/ngx/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path $work/ngx/tmp; proxy_temp_path $work/ngx/tmp;
  fastcgi_temp_path $work/ngx/tmp; uwsgi_temp_path $work/ngx/tmp; scgi_temp_path $work/ngx/tmp;
  server { listen 127.0.0.1:$nport; root $work/ngx/www; }
}
NGX
env LD_PRELOAD="${SW_TEST_PRELOAD:+$SW_TEST_PRELOAD:}$SWAGENT_LIB" \
    nginx -c "$work/ngx/nginx.conf" -p "$work/ngx" > "$work/ngx.err" 2>&1 &
pids="$pids $!"
probes=0 # requests nginx answered outside wrk
probe() { curl -sf -o /dev/null "http://127.0.0.1:$nport/" && probes=$((probes + 1)); }
wait_for probe 100 || fail "nginx did not start"
worker=$(pgrep -P "$(cat "$work/ngx/nginx.pid")" | head -n 1)
[ -n "$worker" ] || fail "no nginx worker"
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$worker/status"; }

# wrk stops on time, not on count: rounds of a few seconds until `total` requests are done.
done_reqs=0
round=0
run_round() {
    wrk -t1 -c4 -d"$1" "http://127.0.0.1:$nport/" > "$work/wrk.out" 2>&1 || fail "wrk"
    n=$(sed -n 's/^ *\([0-9][0-9]*\) requests in .*/\1/p' "$work/wrk.out")
    [ -n "$n" ] || fail "wrk output: $(cat "$work/wrk.out")"
    grep -q "Non-2xx" "$work/wrk.out" && fail "errors from nginx: $(cat "$work/wrk.out")"
    done_reqs=$((done_reqs + n))
}
run_round 2s # warm-up
before=$(rss)
start=$done_reqs
while [ $((done_reqs - start)) -lt "$total" ]; do
    round=$((round + 1))
    [ "$round" -le 200 ] || fail "too slow: $((done_reqs - start)) requests in 200 rounds"
    run_round 3s
    echo "round $round: $((done_reqs - start)) requests, worker RSS $(rss) KiB"
done
after=$(rss)
kill -0 "$worker" || fail "nginx worker died"
segs=$(wc -l < "$work/seg.json")
echo "requests after warm-up: $((done_reqs - start)); RSS before $before KiB, after $after KiB" \
    "(limit +$limit KiB); segments at the collector: $segs"
# Exact accounting: the worker's ring (swagent status) once drained, against the requests.
# wrk counts the responses it read; at the end of each round up to 4 requests (one per
# connection) may have been served without wrk counting them.
ring_line() { "$SWAGENT_CLI" status --runtime-dir "$RUN" 2>/dev/null | grep "^  pid $worker "; }
ring_val() { ring_line | sed -n "s/.* $1=\([0-9]*\).*/\1/p" | head -n 1; }
wait_for '[ "$(ring_val pending)" = 0 ]' 300 || fail "the ring was not drained: $(ring_line)"
c=$(ring_val committed) d=$(ring_val dropped) s=$(ring_val shed)
reqs=$((done_reqs + probes))
[ -n "$c" ] || fail "no ring of the worker: $("$SWAGENT_CLI" status --runtime-dir "$RUN" 2>&1)"
wait_for "[ \$(wc -l < '$work/seg.json') -ge $c ]" 300 ||
    fail "$c segments committed, $(wc -l < "$work/seg.json") at the collector after 30 s"
segs=$(wc -l < "$work/seg.json")
uniq=$(jq -r .traceSegmentId "$work/seg.json" | sort -u | wc -l)
echo "requests counted: $reqs (wrk + $probes probes) in $((round + 1)) rounds; worker ring:" \
    "committed=$c dropped=$d shed=$s; segments at the collector: $segs ($uniq distinct)"
[ "$d" = 0 ] || fail "the worker dropped $d finished segments"
[ $((c + s)) -ge $reqs ] && [ $((c + s)) -le $((reqs + 4 * (round + 1))) ] ||
    fail "committed $c + shed $s for $reqs requests counted"
[ "$segs" = "$c" ] && [ "$uniq" = "$c" ] ||
    fail "$c segments committed, $segs at the collector ($uniq distinct)"
[ $((after - before)) -lt "$limit" ] || fail "RSS grew by $((after - before)) KiB"
echo "ok soak"
