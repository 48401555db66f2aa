#!/usr/bin/env bash
# logs.sh - stdout/stderr lines as SkyWalking logs (swagent.log_capture; issue 38 item 5;
# agent/logcap.c, agent/reporter/logs.c, docs/logs.md):
#  1. log_capture=on: a traced python3 server (logs_server.py) writes a line per request to
#     stdout and one to stderr: every line arrives at collector-stub (LogReportService/collect)
#     with service, instance, timestamp and the traceId / traceSegmentId / spanId 0 of the
#     segment of its own request, tagged stream=stdout|stderr; the line written before any
#     request does not arrive (on = lines of traced requests only). Bad input: a line written
#     in three writes arrives as one line; a 1 MiB line arrives cut to swagent.log_max_line
#     with the mark and tag swagent.cut; 256 binary bytes arrive as valid UTF-8 (U+FFFD for the
#     invalid bytes: the stub refuses invalid UTF-8); "no newline ever" arrives once the
#     process has been quiet for a second.
#  2. The same server and requests without the agent: stdout and stderr byte-identical.
#  3. log_capture=all: the line written outside a request arrives, without a trace context.
#     Five requests served at once on five threads, each writing a line before and after a
#     pause: every line carries the ids of the request its thread serves.
#  4. log_capture off (the default): nothing arrives.
E2E_NAME=logs
. "$E2E_DIR/lib.sh"
e2e_init
write_config 'swagent.log_capture=${SW_AGENT_LOG_CAPTURE:off}' 'swagent.log_max_line=4096' \
    'swagent.log_cap_bytes_per_sec=67108864'
export SW_AGENT_SAMPLE=-1
STUB_ARGS="--logs $T/logs.json" start_stub
: >>"$T/logs.json"

# run_server NAME [traced SERVICE]: starts logs_server.py (stdout $T/NAME.out, stderr
# $T/NAME.err), sets SRV (port) and SRV_PID.
run_server() {
    local name=$1
    shift
    rm -f "$T/$name.port"
    if [ $# -gt 0 ]; then
        env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME="$2" python3 "$E2E_DIR/logs_server.py" \
            "$T/$name.port" >"$T/$name.out" 2>"$T/$name.err" &
    else
        python3 "$E2E_DIR/logs_server.py" "$T/$name.port" >"$T/$name.out" 2>"$T/$name.err" &
    fi
    SRV_PID=$!
    PIDS="$PIDS $SRV_PID"
    wait_for "[ -s '$T/$name.port' ]" 15 || fail "$name did not start"
    SRV=$(cat "$T/$name.port")
}
requests() {
    for i in 1 2 3 4 5 6 7 8 9 10; do
        curl -sSf -o /dev/null "http://127.0.0.1:$SRV/r$i" || fail "request /r$i"
    done
    for p in split big bin tail; do
        curl -sSf -o /dev/null "http://127.0.0.1:$SRV/$p" || fail "request /$p"
    done
}
stop_server() {
    kill "$SRV_PID" 2>/dev/null
    wait "$SRV_PID" 2>/dev/null
}
logs_of() { jq -c --arg s "$1" 'select(.service == $s)' "$T/logs.json"; }

# ---- 1. log_capture=on ----
export SW_AGENT_LOG_CAPTURE=on
run_server a traced e2e-logs
requests
wait_segments 14
wait_for "[ \$(logs_of e2e-logs | wc -l) -ge 25 ]" 20 ||
    fail "only $(logs_of e2e-logs | wc -l) of 25 log lines arrived: $(tail -c 3000 "$T/logs.json")"
sleep 1.5
logs_of e2e-logs >"$T/a.logs"
INST=$(jq -r 'select(.service == "e2e-logs") | .serviceInstance' "$T/seg.json" | head -1)
[ "$(wc -l <"$T/a.logs")" -eq 25 ] || fail "$(wc -l <"$T/a.logs") log lines, 25 expected: $(cut -c1-300 "$T/a.logs")"
# Every request line, on both streams, with its own request's ids.
jq -e -n --slurpfile s "$T/seg.json" --slurpfile l "$T/a.logs" --arg inst "$INST" \
    --argjson t0 "$T_START" '
    [range(1; 11) | tostring] | all(. as $n |
        ($s | map(select(.spans[] | .spanId == 0 and .operationName == "GET:/r\($n)"))) as $seg
        | ($seg | length) == 1
        and ([$l[] | select(.text == "req /r\($n) \($n)" or .text == "err /r\($n)")]) as $ln
        | ($ln | length) == 2
        and all($ln[]; .traceContext.traceId == $seg[0].traceId
            and .traceContext.traceSegmentId == $seg[0].traceSegmentId
            and .traceContext.spanId == 0 and .serviceInstance == $inst and .type == "text"
            and (.timestamp | tonumber) >= $t0)
        and ([$ln[] | .tags[] | select(.key == "stream") | .value] | sort) == ["stderr", "stdout"])' \
    >/dev/null || fail "request lines without their request's trace ids: $(cut -c1-400 "$T/a.logs" | head -30)"
# Each request's trace ids differ (every line is linked to its own trace, not a shared one).
[ "$(jq -r 'select(.text | startswith("req ")) | .traceContext.traceId' "$T/a.logs" | sort -u | wc -l)" -eq 10 ] ||
    fail "the 10 request lines do not carry 10 trace ids"
# A request with a parent (sw8 from an upstream service, a 63-byte trace id): its line carries
# that trace id.
TID="upstream-trace-$(printf 'x%.0s' $(seq 48))"
b64() { printf '%s' "$1" | base64 -w0; }
SW8="1-$(b64 "$TID")-$(b64 upstream-segment-1)-3-$(b64 upstream-svc)-$(b64 upstream-inst)-$(b64 /from)-$(b64 127.0.0.1:$SRV)"
curl -sSf -o /dev/null -H "sw8: $SW8" "http://127.0.0.1:$SRV/r42" || fail "request /r42"
wait_for "[ \$(logs_of e2e-logs | grep -c 'req /r42 42') -ge 1 ]" 20 || fail "the line of the request with a parent did not arrive"
logs_of e2e-logs | jq -e -s --arg t "$TID" 'map(select(.text == "req /r42 42")) | length == 1
    and .[0].traceContext.traceId == $t and (.[0].traceContext.traceSegmentId | length) > 0' >/dev/null ||
    fail "the line of a request with a parent does not carry its trace id: $(logs_of e2e-logs | grep 'r42' | cut -c1-400)"
jq -e -s --arg t "$TID" 'map(select(.spans[0].operationName == "GET:/r42")) | .[0].traceId == $t' "$T/seg.json" >/dev/null ||
    fail "the segment of /r42 is not in the upstream trace"
jq -e -s 'all(.[]; .text != "started")' "$T/a.logs" >/dev/null ||
    fail "the line written outside a request arrived with log_capture=on"
jq -e -s 'map(select(.text == "part-one part-two part-three")) | length == 1' "$T/a.logs" >/dev/null ||
    fail "a line written in three writes did not arrive as one line"
jq -e -s --arg b "$(printf 'B%.0s' $(seq 4096)) [swagent: line cut]" '
    map(select(.text | startswith("BBBB"))) | length == 1 and .[0].text == $b
    and ([.[0].tags[] | select(.key == "swagent.cut") | .value] == ["true"])' "$T/a.logs" >/dev/null ||
    fail "the 1 MiB line did not arrive cut to 4096 bytes with the mark"
# (bytes 0-255 hold a newline: two lines; 0 and 128-255 are not UTF-8)
jq -e -s --arg hi "$(printf '\xef\xbf\xbd%.0s' $(seq 128))" '
    (map(select(.text == "\ufffd\u0001\u0002\u0003\u0004\u0005\u0006\u0007\u0008\t")) | length == 1)
    and (map(select(.text | startswith("\u000b\u000c\r\u000e")
        and contains("0123456789:;<=>?@ABC") and endswith("}~\u007f" + $hi))) | length == 1)' \
    "$T/a.logs" >/dev/null || fail "the binary line did not arrive as valid UTF-8 with U+FFFD"
jq -e -s 'map(select(.text == "no newline ever")) | length == 1 and .[0].traceContext != null' \
    "$T/a.logs" >/dev/null || fail "the line without a newline did not arrive (with its request's ids)"
"$SWAGENT_CLI" status --runtime-dir "$T/run" >"$T/status.out" 2>&1
grep -q "pid $SRV_PID live .* log_bytes=[1-9][0-9]* log_capped=0 log_lost=[0-9]* given_up=[0-9]*$" "$T/status.out" ||
    fail "status: $(grep -a "pid $SRV_PID" "$T/status.out")"
# The reporter rewrites its status about once a second.
wait_for "'$SWAGENT_CLI' status --runtime-dir '$T/run' 2>&1 | grep -q 'logs=on max_line=4096 .* lines_sent=27 '" 10 ||
    fail "status: $("$SWAGENT_CLI" status --runtime-dir "$T/run" 2>&1 | grep -a 'logs=')"
stop_server

# ---- 2. byte-identical output without the agent ----
run_server b
requests
curl -sSf -o /dev/null "http://127.0.0.1:$SRV/r42" || fail "request /r42 (bare)"
sleep 0.5
stop_server
cmp "$T/a.out" "$T/b.out" || fail "stdout differs with the agent ($(wc -c <"$T/a.out") vs $(wc -c <"$T/b.out") bytes)"
cmp "$T/a.err" "$T/b.err" || fail "stderr differs with the agent"
[ "$(wc -c <"$T/a.out")" -gt 1048576 ] || fail "the server wrote too little: $(wc -c <"$T/a.out") bytes"

# ---- 3. log_capture=all ----
export SW_AGENT_LOG_CAPTURE=all
run_server c traced e2e-logs-all
wait_for "[ \$(logs_of e2e-logs-all | wc -l) -ge 1 ]" 20 || fail "no line arrived with log_capture=all"
curl -sSf -o /dev/null "http://127.0.0.1:$SRV/r1" || fail "request /r1 (all)"
wait_for "[ \$(logs_of e2e-logs-all | wc -l) -ge 3 ]" 20 || fail "request lines missing with log_capture=all"
logs_of e2e-logs-all >"$T/c.logs"
jq -e -s 'map(select(.text == "started")) | length == 1 and .[0].traceContext == null' "$T/c.logs" \
    >/dev/null || fail "the line outside a request: $(cat "$T/c.logs")"
jq -e -s 'map(select(.text == "req /r1 1")) | length == 1 and .[0].traceContext.traceId != ""' \
    "$T/c.logs" >/dev/null || fail "the request line with log_capture=all: $(cat "$T/c.logs")"
# Five at once, one thread each.
SEG_FROM=$(lines "$T/seg.json")
cpids=""
for i in 1 2 3 4 5; do
    curl -sSf -o /dev/null "http://127.0.0.1:$SRV/par$i" &
    cpids="$cpids $!"
done
for p in $cpids; do wait "$p" || fail "a parallel request failed"; done
wait_segments 5
wait_for "[ \$(logs_of e2e-logs-all | grep -c '\"text\":\"[ab] [1-5]\"') -ge 10 ]" 20 ||
    fail "the parallel requests' lines did not arrive: $(logs_of e2e-logs-all | tail -n 12 | cut -c1-300)"
logs_of e2e-logs-all >"$T/par.logs"
jq -e -n --slurpfile s "$T/seg.json" --slurpfile l "$T/par.logs" '
    [range(1; 6) | tostring] | all(. as $n |
        ($s | map(select(.spans[] | .spanId == 0 and .operationName == "GET:/par\($n)"))) as $seg
        | ($seg | length) == 1
        and ([$l[] | select(.text == "a \($n)" or .text == "b \($n)")]) as $ln
        | ($ln | length) == 2
        and all($ln[]; .traceContext.traceId == $seg[0].traceId
            and .traceContext.traceSegmentId == $seg[0].traceSegmentId))' >/dev/null ||
    fail "a line of a parallel request carries another request's ids: $(grep '"text":"[ab] ' "$T/par.logs" | cut -c1-400)"
stop_server

# ---- 4. off (the default) ----
unset SW_AGENT_LOG_CAPTURE
run_server d traced e2e-logs-off
SEG_FROM=$(lines "$T/seg.json")
for i in 1 2 3; do curl -sSf -o /dev/null "http://127.0.0.1:$SRV/r$i" || fail "request (off)"; done
wait_segments 3
[ "$(logs_of e2e-logs-off | wc -l)" -eq 0 ] || fail "lines arrived with log_capture off"
stop_server
echo "ok logs"
