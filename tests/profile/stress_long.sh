#!/usr/bin/env bash
# stress_long.sh BUILD_DIR [SECONDS] - issue 39's long profiling stress (docs/profiling.md,
# "Stress"), run by hand once per sanitizer build (not a ctest test; the short one is
# profile_stress):
#   nice tests/profile/stress_long.sh build-asan 600
#   nice tests/profile/stress_long.sh build-tsan 600
# tests/profile/slow_server.c (a thread per connection) under libswagent.so of BUILD_DIR serves
# GET /nap (~2 ms busy, usleep 4 ms, poll 6 ms: every request slow), and
# tests/profile/stress_client.c sends it 8 threads x 50 requests/s for SECONDS, checking every
# answer. Four ProfileTasks for GET:/nap follow each other (threshold 5 ms, period 10 ms,
# MaxSamplingCount 9, each SECONDS/4 long rounded up to minutes), so requests are armed,
# sampled (at the wait wrappers too) and counted again and again; agent.sample_n_per_3_secs=30
# leaves most requests unsampled: the profiled ones go through the keep path (swagent.kept=
# profiled). Sanitizer reports of every process go to $T/san (ASAN/UBSAN/TSAN log_path).
# Prints the figures: requests, answers, errors, snapshots, traces profiled and reported,
# segments, sanitizer reports, the reporter's RSS at the start and the end. Exits 1 on an
# error answer, a dead server, a profiled segment not reported, or a sanitizer report.
BUILD=$(cd "${1:?build dir}" && pwd)
SECS=${2:-600}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export SWAGENT_LIB=$BUILD/agent/libswagent.so
# The reporter and collector-stub may come from another build (STRESS_TOOLS=build): under TSan,
# gRPC's uninstrumented threads give false reports in both, and the agent's spawn of the
# reporter (a CLONE_VFORK child) trips TSan's fork handling; the reporter is then started here
# before the server, which finds it running and spawns none.
TOOLS=$(cd "${STRESS_TOOLS:-$BUILD}" && pwd)
export SWAGENT_REPORTER=$TOOLS/agent/swagent-reporter
COLLECTOR_STUB=$TOOLS/collector-stub/collector-stub
SLOW_SERVER=$BUILD/tests/profile_slow_server
CLIENT=$BUILD/tests/profile_stress_client
E2E_DIR=$ROOT/tests/e2e
E2E_NAME=profile_stress_long
. "$E2E_DIR/lib.sh"
e2e_init
for f in "$SWAGENT_LIB" "$SWAGENT_REPORTER" "$COLLECTOR_STUB" "$SLOW_SERVER" "$CLIENT"; do
    [ -x "$f" ] || [ -f "$f" ] || fail "$f not built"
done
mkdir -p "$T/san"
export ASAN_OPTIONS=detect_leaks=1:verify_asan_link_order=0:log_path=$T/san/asan
export UBSAN_OPTIONS=print_stacktrace=1:log_path=$T/san/ubsan
export TSAN_OPTIONS=second_deadlock_stack=1:symbolize=0:log_path=$T/san/tsan # (symbolize=0: the symbolizer would get the agent preloaded)
export SW_AGENT_SAMPLE=30
write_config 'collector.get_profile_task_interval=1'
MIN=$(( (SECS + 239) / 240 ))
specs=()
for i in 0 1 2 3; do
    specs+=(--profile-task "EndpointName=GET:/nap,MinDurationThreshold=5,DumpPeriod=10,MaxSamplingCount=9,Duration=$MIN,start=+$((3000 + i * MIN * 60000))")
done
"$COLLECTOR_STUB" --listen 127.0.0.1:0 --port-file "$T/stub.port" --segments "$T/seg.json" \
    --profile "$T/prof.json" "${specs[@]}" 2>"$T/stub.err" &
PIDS="$PIDS $!"
wait_for "[ -s '$T/stub.port' ]" 10 || fail "collector-stub did not start"
export SW_AGENT_COLLECTOR_BACKEND_SERVICES=127.0.0.1:$(cat "$T/stub.port")
if [ -n "${STRESS_TOOLS:-}" ]; then
    "$SWAGENT_REPORTER" --runtime-dir "$T/run" --collector "$SW_AGENT_COLLECTOR_BACKEND_SERVICES" \
        --config "$T/agent.config" --idle-exit 30 2>>"$T/rep.err" &
    PIDS="$PIDS $!"
    wait_for "grep -qs 'started: pid' '$T/run/swagent-reporter.log'" 20 || fail "the reporter did not start"
fi
export SLOW_THREADS=1 # (not through env(1): a sanitizer build's agent cannot be preloaded into it)
start_server srv traced prof-stress "$SLOW_SERVER"
SP=$PORT SRV_PID=$LAST_PID
[ "$(curl -sS "http://127.0.0.1:$SP/fast")" = fast ] || fail "fast request failed"
RLOG=$T/run/swagent-reporter.log
wait_for "grep -qs 'task .* is running' '$RLOG'" 30 || fail "the first task never ran"
RPID=$(sed -n 's/.*reporter .* started: pid \([0-9]*\),.*/\1/p' "$RLOG" | tail -n 1)
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo gone; }
RSS0=$(rss "$RPID") SRSS0=$(rss "$SRV_PID")
echo "start: reporter pid $RPID RSS ${RSS0} kB, server RSS ${SRSS0} kB; $SECS s of 8 x 50 req/s"
"$CLIENT" "$SP" 8 50 "$SECS" /nap >"$T/client.out" 2>"$T/client.err" &
CPID=$!
PIDS="$PIDS $CPID"
while kill -0 "$CPID" 2>/dev/null; do
    sleep 60
    echo "  $(date -u +%T) reporter RSS $(rss "$RPID") kB, server RSS $(rss "$SRV_PID") kB," \
        "snapshots $(grep -c '"collectSnapshot"' "$T/prof.json"), segments $(wc -l <"$T/seg.json")"
done
wait "$CPID"
crc=$?
sleep 5
RSS1=$(rss "$RPID") SRSS1=$(rss "$SRV_PID")
cat "$T/client.out" "$T/client.err"
alive=yes
kill -0 "$SRV_PID" 2>/dev/null || alive=no
snaps=$(jq -s 'map(select(.call == "collectSnapshot")) | length' "$T/prof.json")
traces=$(jq -s 'map(select(.call == "collectSnapshot") | .traceSegmentId) | unique | length' "$T/prof.json")
jq -s 'map(select(.call == "collectSnapshot") | .traceSegmentId) | unique' "$T/prof.json" >"$T/prof.ids"
reported=$(jq -s --slurpfile p "$T/prof.ids" '[.[] | select(.traceSegmentId as $i | $p[0] | index($i))] | length' "$T/seg.json")
kept=$(jq -s '[.[] | .spans[] | select(.spanId == 0) | .tags[]? | select(.key == "swagent.kept" and .value == "profiled")] | length' "$T/seg.json")
segs=$(wc -l <"$T/seg.json")
finished=$(jq -s 'map(select(.call == "reportTaskFinish")) | length' "$T/prof.json")
seqok=$(jq -s '[.[] | select(.call == "collectSnapshot")] | group_by(.traceSegmentId)
    | all(sort_by(.sequence) | . as $g | [range(0; $g | length)] == [$g[].sequence])' "$T/prof.json")
nsan=$(find "$T/san" -type f | wc -l)
echo "figures: $(cat "$T/client.out"); server alive: $alive; snapshots $snaps of $traces traces" \
    "(sequences 0..n-1: $seqok), $reported of them reported ($kept kept as profiled), segments" \
    "$segs, tasks finished $finished; sanitizer reports: $nsan; reporter RSS $RSS0 -> $RSS1 kB," \
    "server RSS $SRSS0 -> $SRSS1 kB"
for f in $(find "$T/san" -type f); do echo "--- $f"; head -n 40 "$f"; done
[ "$crc" = 0 ] || fail "the client saw errors"
[ "$alive" = yes ] || fail "the server died"
[ "$reported" = "$traces" ] && [ "$traces" -gt 0 ] || fail "profiled segments not reported ($reported of $traces)"
[ "$seqok" = true ] || fail "sequences not consecutive"
[ "$nsan" = 0 ] || fail "sanitizer reports"
echo "PASS ($E2E_NAME)"
