#!/usr/bin/env bash
# profile.sh MODE - trace profiling end to end (docs/profiling.md): collector-stub hands out a
# ProfileTask (--profile-task), the reporter polls it every second and writes the task page,
# tests/profile/slow_server.c runs under libswagent.so, and the snapshots that reach the stub
# ($T/prof.json) are checked with jq and `collector-stub profile`.
#   slow    GET:/slow (300 ms busy in slow_busy_function), threshold 100 ms, period 20 ms, max
#           5: 7 slow and 8 fast requests; exactly 5 traces profiled, each with consecutive
#           sequences from 0, (duration - 100 ms) / 20 ms snapshots inside its request, the
#           task id, segment ids of reported GET:/slow segments, and most samples under
#           slow_busy_function in the tree
#   unsampled  sample_n_per_3_secs=1, keeping beyond the quota off: unsampled GET:/slow
#           requests are profiled all the same, and their segments reported (swagent.kept=
#           profiled) with the ids the snapshots name
#   wait    GET:/wait (waits in epoll_wait, nanosleep, poll, select, clock_nanosleep, usleep,
#           sigtimedwait, read): no wait of the profiled request sees EINTR (the same as
#           without the agent), and the tree shows the waits (samples taken at the wrappers)
#   sleep   GET:/sleeps: sleep(1), usleep, nanosleep of a watched thread are sampled at their
#           wrappers and each sleeps its whole time, returning 0 (no EINTR, nothing cut short)
#   exec    the server started by a shell that execs it, re-execing itself inside profiled
#           requests with signals blocked: it survives, and its new image is profiled
#   fork    workers forked after the task arrived are profiled under their own ids
#   leak    the reporter under valgrind through a profiling session of two servers (one gone
#           before its snapshots are drained): no leak, no memory error at its exit
#   finish  a task for an endpoint that is never requested: no snapshot, and reportTaskFinish
#           once the task's time is over
#   nginx   nginx (one worker) proxying GET:/slow to the C server: samples in nginx's
#           epoll_wait under ngx_epoll_process_events, every response unchanged, no nginx error
#   python  python3 http.server sleeping 300 ms: samples in clock_nanosleep (time.sleep)
#   stress  a thread per connection, 8 parallel clients for 10 s, every request matching: all
#           answers right, exactly MaxSamplingCount (9) traces, the server alive
#   bad     task commands with bad values (DumpPeriod 5, MaxSamplingCount 0, no EndpointName,
#           Duration 20): each is logged by the reporter and ignored; nothing is sampled
MODE=${1:?mode}
E2E_NAME=profile_$MODE
. "$E2E_DIR/lib.sh"
e2e_init
write_config 'collector.get_profile_task_interval=1' 'logging.level=DEBUG'

# start_stub with tasks: collector-stub --profile-task SPEC... --profile $T/prof.json
start_prof_stub() {
    local args=()
    for s in "$@"; do args+=(--profile-task "$s"); done
    "$COLLECTOR_STUB" --listen 127.0.0.1:0 --port-file "$T/stub.port" --segments "$T/seg.json" \
        --profile "$T/prof.json" "${args[@]}" 2>"$T/stub.err" &
    PIDS="$PIDS $!"
    wait_for "[ -s '$T/stub.port' ]" 10 || fail "collector-stub did not start"
    export SW_AGENT_COLLECTOR_BACKEND_SERVICES=127.0.0.1:$(cat "$T/stub.port")
    : >>"$T/seg.json"
    : >>"$T/prof.json"
}

# The task is running once the reporter has polled it (then one more poll period).
wait_task_polled() {
    wait_for "grep -q '\"tasks\":\\[\"' '$T/prof.json'" 15 || fail "the reporter never polled the task"
    sleep 1.5
}

# caught PID: 1 when PID has a handler for the profiling signal (SIGRTMAX - 3), else 0.
caught() {
    local m
    m=$(awk '/^SigCgt:/ { print $2 }' "/proc/$1/status")
    echo $(( (0x$m >> ($(kill -l SIGRTMAX) - 3 - 1)) & 1 ))
}

snapshots() { jq -s "map(select(.call == \"collectSnapshot\"))$1" "$T/prof.json"; }

# wait_trees N: snapshots of N traces arrived (and 2 s more for their last ones); the profile
# view of them in $T/tree.out.
wait_trees() {
    wait_for "[ \$(snapshots '| map(.traceSegmentId) | unique | length') -ge $1 ]" 15 ||
        fail "snapshots of $1 traces did not arrive"
    sleep 2
    "$COLLECTOR_STUB" profile "$T/prof.json" >"$T/tree.out" || fail "profile view failed"
}
# The number of reported segments that snapshots name.
profiled_reported() {
    snapshots '| map(.traceSegmentId) | unique' >"$T/prof.ids"
    jq -s --slurpfile p "$T/prof.ids" '[.[] | select(.traceSegmentId as $i | $p[0] | index($i))]
        | length' "$T/seg.json"
}
RLOG=$T/run/swagent-reporter.log

case $MODE in
slow)
    start_prof_stub "EndpointName=GET:/slow,MinDurationThreshold=100,DumpPeriod=20,MaxSamplingCount=5,Duration=1,start=-20000"
    start_server srv traced prof-svc "$SLOW_SERVER"
    SP=$PORT SRV_PID=$LAST_PID
    [ "$(curl -sS "http://127.0.0.1:$SP/fast")" = fast ] || fail "fast request failed"
    wait_task_polled
    [ "$(caught "$SRV_PID")" = 0 ] || fail "a signal handler was installed before any request matched"
    for i in 1 2 3 4 5 6 7; do
        [ "$(curl -sS "http://127.0.0.1:$SP/slow")" = slow ] || fail "slow request $i failed"
        [ "$(curl -sS "http://127.0.0.1:$SP/fast")" = fast ] || fail "fast request failed"
    done
    wait_segments 15
    wait_trees 5
    TASK=$(jq -r 'select(.call == "getProfileTaskCommands") | .tasks[]' "$T/prof.json" | head -n 1)
    check "[\$s[] | select(.call == \"collectSnapshot\")] as \$p
        | ([\$p[].traceSegmentId] | unique | length) == 5" \
        "exactly MaxSamplingCount (5) traces profiled" "$T/prof.json"
    check "[\$s[] | select(.call == \"collectSnapshot\")] | all(.taskId == \"$TASK\")" \
        "every snapshot names the task" "$T/prof.json"
    check '[$s[] | select(.call == "collectSnapshot")] | group_by(.traceSegmentId)
        | all(sort_by(.sequence) | . as $g | ($g | length) >= 6
              and ([range(0; $g | length)] == [$g[].sequence]))' \
        "per trace at least 6 snapshots (200 ms / 20 ms) with sequences 0..n-1" "$T/prof.json"
    # The profiled segments were reported: GET:/slow entries, the snapshots inside them.
    jq -s '[.[] | select(.call == "collectSnapshot")] | group_by(.traceSegmentId)
        | map({id: .[0].traceSegmentId, first: (map(.time) | min), last: (map(.time) | max),
               n: length})' \
        "$T/prof.json" >"$T/prof.segs"
    jq -e -s --slurpfile p "$T/prof.segs" '. as $s | all($p[0][]; . as $x
        | ([$s[] | select(.traceSegmentId == $x.id)] | length) == 1
        and ([$s[] | select(.traceSegmentId == $x.id)][0].spans[0]
             | .operationName == "GET:/slow"
             and ($x.first >= (.startTime | tonumber) + 90)
             and ($x.last <= (.endTime | tonumber) + 60)
             and ((((.endTime | tonumber) - (.startTime | tonumber) - 100) / 20 | floor) as $want
                  | $x.n >= $want - 3 and $x.n <= $want + 2)))' "$T/seg.json" >/dev/null ||
        fail "a profiled segment is missing, not GET:/slow, its snapshots lie outside it, or their number is not (duration - 100 ms) / 20 ms, -3..+2 ($(cat "$T/prof.segs"))"
    [ "$(caught "$SRV_PID")" = 1 ] || fail "no handler for the profiling signal while profiled"
    # In each tree: the nodes of the slow function (its call site, and itself as a leaf) hold
    # at least 7 of the ~10 snapshots of its 200 ms after the threshold (expiries delayed by a
    # loaded machine come as one held sample standing for all their periods, taken in the
    # function; the rest: the response's write after it).
    awk '/^segment /{ if (seg) print seg, n, sum; seg=$2; n=$3; sum=0; next }
         /slow_busy_function/ { sum += $1 }
         END { if (seg) print seg, n, sum }' "$T/tree.out" >"$T/tree.sum"
    [ "$(wc -l <"$T/tree.sum")" -eq 5 ] || fail "the view has not 5 trees: $(cat "$T/tree.out")"
    awk '{ if ($3 < 7) bad = 1 } END { exit bad }' "$T/tree.sum" ||
        fail "slow_busy_function holds fewer than 7 of a trace's snapshots: $(cat "$T/tree.out")"
    grep -q 'slow_server!main:[0-9]' "$T/tree.out" || grep -q '!main:[0-9]' "$T/tree.out" ||
        fail "no file:line in the callers' signatures: $(cat "$T/tree.out")"
    grep -q '^ *[0-9]* *[0-9]* *[0-9]* *  *[a-z_]*!slow_busy_function:[0-9]*$' "$T/tree.out" ||
        fail "slow_busy_function is not a node of its own: $(cat "$T/tree.out")"
    echo "--- the first tree"; sed -n '1,/^segment /{p}' "$T/tree.out" | head -n 12
    ;;
unsampled)
    # agent.sample_n_per_3_secs=1 and keeping beyond the quota off (keep_errors false,
    # keep_slow_ms 0): a /fast before each /slow takes the window's one sample, so the slow
    # requests are unsampled. The task still profiles them (issue 39 item 4) and their segments
    # are reported, tagged swagent.kept=profiled: every snapshot names a reported GET:/slow
    # segment, and at least 2 of the 3 profiled traces were unsampled ones.
    write_config 'collector.get_profile_task_interval=1' 'logging.level=DEBUG' \
        'swagent.keep_errors=false' 'swagent.keep_slow_ms=0'
    export SW_AGENT_SAMPLE=1
    start_prof_stub "EndpointName=GET:/slow,MinDurationThreshold=100,DumpPeriod=20,MaxSamplingCount=3,Duration=1,start=-20000"
    start_server srv traced prof-svc "$SLOW_SERVER"
    SP=$PORT
    [ "$(curl -sS "http://127.0.0.1:$SP/fast")" = fast ] || fail "fast request failed"
    wait_task_polled
    for i in 1 2 3 4 5; do
        [ "$(curl -sS "http://127.0.0.1:$SP/fast")" = fast ] || fail "fast request failed"
        [ "$(curl -sS "http://127.0.0.1:$SP/slow")" = slow ] || fail "slow request $i failed"
    done
    wait_trees 3
    wait_for "[ \$(profiled_reported) -ge 3 ]" 15 ||
        fail "the profiled segments were not reported: $(snapshots '| map(.traceSegmentId) | unique')"
    check '[$s[] | select(.call == "collectSnapshot")] | (map(.traceSegmentId) | unique | length) == 3' \
        "exactly MaxSamplingCount (3) traces profiled" "$T/prof.json"
    snapshots '| map(.traceSegmentId) | unique' >"$T/prof.ids"
    jq -e -s --slurpfile p "$T/prof.ids" '. as $s | all($p[0][]; . as $id
        | [$s[] | select(.traceSegmentId == $id)] | length == 1
          and ([.[0].spans[] | select(.spanId == 0)][0].operationName == "GET:/slow"))' \
        "$T/seg.json" >/dev/null ||
        fail "a profiled segment is missing or not GET:/slow ($(cat "$T/prof.ids"))"
    n=$(jq -s --slurpfile p "$T/prof.ids" '[.[] | select(.traceSegmentId as $i | $p[0] | index($i))
        | .spans[] | select(.spanId == 0)
        | select([.tags[]? | select(.key == "swagent.kept" and .value == "profiled")]
        | length == 1)] | length' "$T/seg.json")
    [ "$n" -ge 2 ] || fail "only $n of the profiled segments were unsampled ones kept for the profile"
    # Not profiled, not kept: no /fast segment beyond the sampled ones carries swagent.kept.
    check '[$s[] | .spans[] | select(.spanId == 0 and .operationName == "GET:/fast")
        | select([.tags[]? | select(.key == "swagent.kept")] | length > 0)] | length == 0' \
        "no unsampled /fast request kept" "$T/seg.json"
    echo "profiled segments kept beyond the quota: $n of 3"
    ;;
wait)
    start_prof_stub "EndpointName=GET:/wait,MinDurationThreshold=20,DumpPeriod=10,MaxSamplingCount=3,Duration=1,start=-20000"
    # Without the agent first: what the application sees on its own.
    "$SLOW_SERVER" >"$T/bare.out" 2>"$T/bare.err" &
    PIDS="$PIDS $!"
    wait_for "grep -q '^PORT ' '$T/bare.out'" 10 || fail "bare server did not start"
    BP=$(sed -n 's/^PORT //p' "$T/bare.out")
    bare=$(curl -sS "http://127.0.0.1:$BP/wait")
    [ "$bare" = ok ] || fail "without the agent /wait answered '$bare'"
    start_server srv traced prof-svc "$SLOW_SERVER"
    SP=$PORT
    [ "$(curl -sS "http://127.0.0.1:$SP/fast")" = fast ] || fail "fast request failed"
    wait_task_polled
    for i in 1 2 3; do
        got=$(curl -sS "http://127.0.0.1:$SP/wait")
        [ "$got" = ok ] || fail "profiled /wait request $i answered '$got' (without the agent: '$bare')"
    done
    wait_trees 3
    for w in epoll_wait nanosleep poll select clock_nanosleep usleep sigtimedwait; do
        grep -q "libswagent.so!$w\$" "$T/tree.out" ||
            fail "no sample taken in $w (held at its wrapper): $(cat "$T/tree.out")"
    done
    # Held samples stand for every period of the wait: epoll_wait's 150 ms is ~15 snapshots.
    n=$(awk '/libswagent.so!epoll_wait$/ { if ($1 > m) m = $1 } END { print m + 0 }' "$T/tree.out")
    [ "$n" -ge 10 ] || fail "the 150 ms epoll_wait has $n snapshots (want >= 10): $(cat "$T/tree.out")"
    ;;
sleep)
    # A watched thread in sleep(1), usleep(200 ms) and nanosleep(200 ms) (GET /sleeps): each
    # is sampled at its wrapper (the held expiries: ~100 snapshots for sleep's 1 s at 10 ms),
    # and each returns 0 after its whole time: no EINTR, no early return, as without the agent.
    start_prof_stub "EndpointName=GET:/sleeps,MinDurationThreshold=10,DumpPeriod=10,MaxSamplingCount=2,Duration=1,start=-20000"
    "$SLOW_SERVER" >"$T/bare.out" 2>"$T/bare.err" &
    PIDS="$PIDS $!"
    wait_for "grep -q '^PORT ' '$T/bare.out'" 10 || fail "bare server did not start"
    bare=$(curl -sS "http://127.0.0.1:$(sed -n 's/^PORT //p' "$T/bare.out")/sleeps")
    [ "$bare" = ok ] || fail "without the agent /sleeps answered '$bare'"
    start_server srv traced prof-svc "$SLOW_SERVER"
    SP=$PORT
    [ "$(curl -sS "http://127.0.0.1:$SP/fast")" = fast ] || fail "fast request failed"
    wait_task_polled
    for i in 1 2; do
        got=$(curl -sS "http://127.0.0.1:$SP/sleeps")
        [ "$got" = ok ] || fail "profiled /sleeps request $i answered '$got' (without the agent: '$bare')"
    done
    wait_trees 2
    for w in sleep usleep nanosleep; do
        grep -q "libswagent.so!$w\$" "$T/tree.out" ||
            fail "no sample taken in $w (held at its wrapper): $(cat "$T/tree.out")"
    done
    n=$(awk '/libswagent.so!sleep$/ { if ($1 > m) m = $1 } END { print m + 0 }' "$T/tree.out")
    [ "$n" -ge 80 ] || fail "sleep(1) has $n snapshots in a trace (want >= 80 of its ~100 periods): $(cat "$T/tree.out")"
    echo "--- the first tree"; sed -n '1,/^segment /{p}' "$T/tree.out" | head -n 14
    ;;
exec)
    # The server is started through a shell that execs it (sh under the agent, then the
    # server's image), and re-execs itself twice inside profiled requests (GET /slow?reexec),
    # with every signal blocked, as servers that mask signals around an exec do: the held
    # expiry of the request's timer must not reach the new image, where the profiling signal's
    # action is the default again (it would kill the server). The server stays the same
    # process, alive, and profiling works in its newest image: its /slow requests are profiled
    # and their segments reported.
    start_prof_stub "EndpointName=GET:/slow,MinDurationThreshold=20,DumpPeriod=10,MaxSamplingCount=5,Duration=1,start=-20000"
    start_server srv traced prof-svc sh -c 'exec "$0"' "$SLOW_SERVER"
    SP=$PORT SRV_PID=$LAST_PID
    [ "$(curl -sS "http://127.0.0.1:$SP/fast")" = fast ] || fail "fast request failed"
    wait_task_polled
    for i in 1 2; do
        got=$(curl -sS "http://127.0.0.1:$SP/slow?reexec") || true
        kill -0 "$SRV_PID" 2>/dev/null || fail "the server died in its exec $i (answer '$got'): $(cat "$T/srv.err")"
        [ "$got" = reexec ] || fail "/slow?reexec $i answered '$got'"
        grep -q 'slow_server' "/proc/$SRV_PID/cmdline" || fail "the server is not the same process"
    done
    # (The new image maps the task page with its ring, at its first segment: a /fast first.)
    [ "$(curl -sS "http://127.0.0.1:$SP/fast")" = fast ] || fail "fast request after the execs failed"
    for i in 1 2 3; do
        [ "$(curl -sS "http://127.0.0.1:$SP/slow")" = slow ] || fail "slow request $i after the execs failed"
    done
    wait_for "[ \$(profiled_reported) -ge 3 ]" 20 ||
        fail "the /slow requests of the new image were not profiled and reported: $(snapshots '| map(.traceSegmentId) | unique')"
    kill -0 "$SRV_PID" || fail "the server died"
    grep -E 'ERROR|FATAL' "$T/srv.err" && fail "the server logged errors"
    if grep 'is pending at the start' "$T/srv.err"; then
        fail "an expiry of the old image's timer reached the new image"
    fi
    echo "traces profiled: $(snapshots '| map(.traceSegmentId) | unique | length'), of them reported: $(profiled_reported)"
    ;;
fork)
    # The task arrives, then the server forks two workers (GET /forkworkers) which serve from
    # then on: the workers' slow requests are profiled, with their own process's ids (not the
    # parent's), their segments reported, every worker alive.
    start_prof_stub "EndpointName=GET:/slow,MinDurationThreshold=50,DumpPeriod=10,MaxSamplingCount=4,Duration=1,start=-20000"
    start_server srv traced prof-svc "$SLOW_SERVER"
    SP=$PORT SRV_PID=$LAST_PID
    [ "$(curl -sS "http://127.0.0.1:$SP/fast")" = fast ] || fail "fast request failed"
    wait_segments 1
    PARENT_UUID=$(jq -r -s '.[0].traceSegmentId | split(".")[0]' "$T/seg.json")
    wait_task_polled
    [ "$(curl -sS "http://127.0.0.1:$SP/forkworkers")" = forked ] || fail "forkworkers failed"
    sleep 0.5
    # (A worker's first request comes before its ring exists: not profiled.)
    for i in 1 2 3 4 5 6 7 8; do
        [ "$(curl -sS "http://127.0.0.1:$SP/slow")" = slow ] || fail "slow request $i to the workers failed"
    done
    wait_trees 4
    wait_for "[ \$(profiled_reported) -ge 4 ]" 15 ||
        fail "the workers' profiled segments were not reported: $(snapshots '| map(.traceSegmentId) | unique')"
    check "[\$s[] | select(.call == \"collectSnapshot\") | .traceSegmentId | split(\".\")[0]] | unique
        | length >= 1 and all(. != \"$PARENT_UUID\")" "the snapshots are the workers' (not the parent's ids)" "$T/prof.json"
    [ "$(pgrep -P "$SRV_PID" | wc -l)" = 2 ] || fail "a worker died"
    grep -q '!slow_busy_function' "$T/tree.out" || fail "no slow_busy_function in the workers' trees: $(cat "$T/tree.out")"
    ;;
leak)
    # The reporter under valgrind (memcheck, --leak-check=full): started by the agent through
    # a wrapper (swagent.reporter_path), through a session of tasks polled, two servers'
    # snapshots symbolised (one server gone before its last snapshots are drained), and the
    # reporter's idle exit: no definite or indirect leak, no memory error.
    # (An ASan build's reporter cannot run under valgrind: there LeakSanitizer checks it at
    # its exit, its reports in $T/vg.<pid>.log.)
    if readelf -d "$SWAGENT_REPORTER" | grep -q 'asan'; then
        cat >"$T/vg-reporter" <<EOF2
#!/bin/sh
ASAN_OPTIONS="\${ASAN_OPTIONS:-}:detect_leaks=1:log_path=$T/vg" exec "$SWAGENT_REPORTER" "\$@"
EOF2
        : >"$T/vg.0.log"
    else
        command -v valgrind >/dev/null || { echo "FAIL: valgrind not installed (scripts/deps.sh)" >&2; exit 1; }
        cat >"$T/vg-reporter" <<EOF2
#!/bin/sh
exec valgrind -q --leak-check=full --show-leak-kinds=definite,indirect \\
    --errors-for-leak-kinds=definite,indirect --error-exitcode=97 \\
    --log-file=$T/vg.%p.log "$SWAGENT_REPORTER" "\$@"
EOF2
    fi
    chmod +x "$T/vg-reporter"
    write_config 'collector.get_profile_task_interval=1' 'logging.level=DEBUG' \
        "swagent.reporter_path=$T/vg-reporter"
    start_prof_stub "EndpointName=GET:/slow,MinDurationThreshold=50,DumpPeriod=10,MaxSamplingCount=4,Duration=1,start=-20000"
    start_server a traced prof-svc "$SLOW_SERVER"
    PA=$PORT A_PID=$LAST_PID
    start_server b traced prof-svc "$SLOW_SERVER"
    PB=$PORT B_PID=$LAST_PID
    [ "$(curl -sS "http://127.0.0.1:$PA/fast")" = fast ] || fail "fast request failed"
    [ "$(curl -sS "http://127.0.0.1:$PB/fast")" = fast ] || fail "fast request failed"
    wait_for "ls $T/vg.*.log >/dev/null 2>&1" 20 || fail "the reporter did not start under valgrind"
    wait_for "grep -q '\"tasks\":\\[\"' '$T/prof.json'" 60 || fail "the reporter never polled the task"
    sleep 2
    for i in 1 2; do
        [ "$(curl -sS "http://127.0.0.1:$PA/slow")" = slow ] || fail "slow request to a failed"
        [ "$(curl -sS "http://127.0.0.1:$PB/slow")" = slow ] || fail "slow request to b failed"
    done
    curl -sS "http://127.0.0.1:$PA/quit" >/dev/null || true
    wait_trees 4
    curl -sS "http://127.0.0.1:$PB/quit" >/dev/null || true
    wait_for "! kill -0 $A_PID 2>/dev/null && ! kill -0 $B_PID 2>/dev/null" 10 || fail "the servers did not quit"
    # The reporter exits once no traced process is left (swagent.reporter_idle_exit=3).
    wait_for "grep -q 'no traced process for' '$RLOG'" 60 || fail "the reporter did not reach its idle exit"
    RPID=$(sed -n 's/.*reporter .* started: pid \([0-9]*\),.*/\1/p' "$RLOG" | tail -n 1)
    [ -n "$RPID" ] || fail "no reporter pid in $RLOG"
    wait_for "! kill -0 $RPID 2>/dev/null" 60 || fail "the reporter (pid $RPID) did not end"
    [ "$(snapshots '| map(.traceSegmentId) | unique | length')" = 4 ] || fail "not 4 traces profiled"
    grep -q '!slow_busy_function' "$T/tree.out" || fail "not symbolised: $(cat "$T/tree.out")"
    cat "$T"/vg.*
    if grep -qE 'definitely lost|indirectly lost|Invalid (read|write)|uninitialised|ERROR SUMMARY: [1-9]|LeakSanitizer|AddressSanitizer' "$T"/vg.*; then
        fail "leaks or memory errors in the reporter: $(cat "$T"/vg.*)"
    fi
    echo "valgrind: no leak, no error in the reporter ($(ls "$T"/vg.*.log | wc -l) run(s))"
    ;;
finish)
    # StartTime 57 s ago, Duration 1 min: runs ~3 s, for an endpoint nobody requests.
    start_prof_stub "EndpointName=GET:/never,MinDurationThreshold=0,DumpPeriod=10,MaxSamplingCount=5,Duration=1,start=-57000"
    start_server srv traced prof-svc "$SLOW_SERVER"
    SP=$PORT SRV_PID=$LAST_PID
    for i in 1 2 3 4 5 6; do
        [ "$(curl -sS "http://127.0.0.1:$SP/slow")" = slow ] || fail "slow request failed"
    done
    wait_for "grep -q '\"call\":\"reportTaskFinish\"' '$T/prof.json'" 20 || fail "no reportTaskFinish"
    TASK=$(jq -r 'select(.call == "getProfileTaskCommands") | .tasks[]' "$T/prof.json" | head -n 1)
    check "[\$s[] | select(.call == \"reportTaskFinish\")] | length == 1 and .[0].taskId == \"$TASK\"
        and .[0].service == \"prof-svc\"" "one reportTaskFinish for the task" "$T/prof.json"
    check '[$s[] | select(.call == "collectSnapshot")] | length == 0' "no snapshot" "$T/prof.json"
    grep -q "task $TASK for prof-svc is running" "$RLOG" || fail "the task never ran"
    # Off until a request matches: no handler for the profiling signal, no timer.
    [ "$(caught "$SRV_PID")" = 0 ] || fail "a signal handler was installed for a task that never matched"
    ;;
bad)
    start_prof_stub "EndpointName=GET:/slow,DumpPeriod=5,MaxSamplingCount=5,TaskId=bad-period,start=-20000" \
        "EndpointName=GET:/slow,MaxSamplingCount=0,TaskId=bad-max,start=-20000" \
        "EndpointName=,TaskId=bad-endpoint,start=-20000" \
        "EndpointName=GET:/slow,Duration=20,TaskId=bad-duration,start=-20000"
    start_server srv traced prof-svc "$SLOW_SERVER"
    SP=$PORT
    [ "$(curl -sS "http://127.0.0.1:$SP/fast")" = fast ] || fail "fast request failed"
    wait_for "grep -q '\"tasks\":\\[\"' '$T/prof.json'" 15 || fail "the reporter never polled"
    sleep 1.5
    for i in 1 2; do
        [ "$(curl -sS "http://127.0.0.1:$SP/slow")" = slow ] || fail "slow request failed"
    done
    sleep 2
    for w in "bad-period): DumpPeriod is not 10..60000 ms" "bad-max): MaxSamplingCount is not 1..9" \
        "bad-endpoint): EndpointName missing" "bad-duration): Duration is not 1..15 minutes"; do
        grep -qF "is ignored (task $w" "$RLOG" || fail "no log line for the bad task ($w)"
    done
    check '[$s[] | select(.call == "collectSnapshot")] | length == 0' "no snapshot" "$T/prof.json"
    # Fetched once: the poll after the first asks from their CreateTime on.
    check '[$s[] | select(.call == "getProfileTaskCommands" and (.tasks | length) > 0)] | length == 1' \
        "the bad tasks are not fetched again" "$T/prof.json"
    [ ! -e "$T/run/$(ls "$T/run" | grep '^profile-' | head -n 1)" ] ||
        [ "$(od -An -tu4 -j16 -N4 "$T/run/$(ls "$T/run" | grep '^profile-' | head -n 1)" | tr -d ' ')" = 0 ] ||
        fail "a bad task was written to the task page"
    ;;
nginx)
    # nginx (traced, one worker) proxies GET:/slow to the C server (untraced, 300 ms): the
    # worker waits in epoll_wait while the upstream works. Every response is the upstream's,
    # and nginx logs no error (an EINTR it did not expect would show there).
    command -v nginx >/dev/null || { echo "FAIL: nginx not installed" >&2; exit 1; }
    start_prof_stub "service=prof-nginx,EndpointName=GET:/slow,MinDurationThreshold=50,DumpPeriod=10,MaxSamplingCount=3,Duration=1,start=-20000"
    "$SLOW_SERVER" >"$T/up.out" 2>"$T/up.err" &
    PIDS="$PIDS $!"
    wait_for "grep -q '^PORT ' '$T/up.out'" 10 || fail "upstream did not start"
    UP=$(sed -n 's/^PORT //p' "$T/up.out")
    NG=$(free_port)
    nginx_proxy_conf "$NG" "$UP" "worker_processes 1;"
    env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=prof-nginx nginx -c "$T/ngx/nginx.conf" \
        -p "$T/ngx" -g 'daemon off;' >"$T/nginx.out" 2>&1 &
    PIDS="$PIDS $!"
    wait_for "(exec 3<>/dev/tcp/127.0.0.1/$NG) 2>/dev/null" 10 || fail "nginx did not start"
    [ "$(curl -sS "http://127.0.0.1:$NG/fast")" = fast ] || fail "fast request through nginx failed"
    wait_task_polled
    for i in 1 2 3 4; do
        got=$(curl -sS -w ' %{http_code}' "http://127.0.0.1:$NG/slow")
        [ "$got" = "slow 200" ] || fail "request $i through nginx answered '$got'"
    done
    wait_trees 3
    check '[$s[] | select(.call == "collectSnapshot")] | (map(.traceSegmentId) | unique | length) == 3
        and all(.stack | length >= 2)' "3 traces profiled (MaxSamplingCount), stacks of 2+ frames" "$T/prof.json"
    grep -q 'libswagent.so!epoll_wait$' "$T/tree.out" ||
        fail "no sample in nginx's epoll_wait: $(cat "$T/tree.out")"
    # Its caller is nginx's ngx_epoll_process_events: by name when nginx has symbols (Debian's
    # is stripped: nginx!0x<offset>, unless the nginx-dbgsym package is installed).
    grep -B1 'libswagent.so!epoll_wait$' "$T/tree.out" | grep -q 'nginx!\(ngx_epoll_process_events\|0x[0-9a-f]*\)' ||
        fail "the wait's caller is not in nginx: $(cat "$T/tree.out")"
    if grep -E '\[(alert|crit|error|emerg)\]' "$T/ngx/error.log"; then
        fail "nginx logged errors while profiled"
    fi
    echo "--- the first tree"; sed -n '1,/^segment /{p}' "$T/tree.out" | head -n 14
    ;;
python)
    # python3's http.server with a handler that sleeps 300 ms (time.sleep: clock_nanosleep).
    start_prof_stub "EndpointName=GET:/sleep,MinDurationThreshold=50,DumpPeriod=10,MaxSamplingCount=2,Duration=1,start=-20000"
    start_server py traced prof-py python3 -u "$E2E_DIR/../profile/sleepy_server.py"
    SP=$PORT
    [ "$(curl -sS "http://127.0.0.1:$SP/fast")" = ok ] || fail "fast request failed"
    wait_task_polled
    for i in 1 2 3; do
        got=$(curl -sS -w ' %{http_code}' "http://127.0.0.1:$SP/sleep")
        [ "$got" = "ok 200" ] || fail "request $i answered '$got'"
    done
    wait_trees 2
    grep -q 'libswagent.so!clock_nanosleep$' "$T/tree.out" ||
        fail "no sample in time.sleep's clock_nanosleep: $(cat "$T/tree.out")"
    n=$(awk '/libswagent.so!clock_nanosleep$/ { s += $1 } END { print s + 0 }' "$T/tree.out")
    [ "$n" -ge 30 ] || fail "the two 250 ms sleeps have $n snapshots (want >= 30): $(cat "$T/tree.out")"
    grep -q 'Traceback' "$T/py.err" && fail "python raised: $(cat "$T/py.err")"
    echo "--- the first tree"; sed -n '1,/^segment /{p}' "$T/tree.out" | head -n 14
    ;;
stress)
    # A thread per connection, 8 clients in parallel for ~10 s, GET:/slow and GET:/wait mixed
    # (every request slow, all matching the task), MaxSamplingCount 9 and 5 watch slots
    # shared by all threads: every answer right (no EINTR in any wait), exactly 9 traces
    # profiled, each with sequences 0..n-1, the server alive.
    start_prof_stub "EndpointName=GET:/wait,MinDurationThreshold=20,DumpPeriod=10,MaxSamplingCount=9,Duration=1,start=-20000"
    start_server srv traced prof-svc env SLOW_THREADS=1 "$SLOW_SERVER"
    SP=$PORT SRV_PID=$LAST_PID
    [ "$(curl -sS "http://127.0.0.1:$SP/fast")" = fast ] || fail "fast request failed"
    wait_task_polled
    t_stop=$(( $(now_ms) + 10000 ))
    for k in 1 2 3 4 5 6 7 8; do
        (
            n=0
            while [ "$(now_ms)" -lt "$t_stop" ]; do
                got=$(curl -sS "http://127.0.0.1:$SP/wait") || { echo "client $k: curl failed"; exit 1; }
                [ "$got" = ok ] || { echo "client $k: /wait answered '$got'"; exit 1; }
                got=$(curl -sS "http://127.0.0.1:$SP/slow") || { echo "client $k: curl failed"; exit 1; }
                [ "$got" = slow ] || { echo "client $k: /slow answered '$got'"; exit 1; }
                n=$((n + 2))
            done
            echo "client $k: $n requests"
        ) >"$T/client$k.out" 2>&1 &
        CLIENTS="${CLIENTS:-} $!"
    done
    for c in $CLIENTS; do wait "$c" || fail "a client failed: $(cat "$T"/client*.out)"; done
    cat "$T"/client*.out
    kill -0 "$SRV_PID" || fail "the server died"
    wait_trees 9
    check '[$s[] | select(.call == "collectSnapshot")] | group_by(.traceSegmentId) | length == 9
        and all(sort_by(.sequence) | . as $g | [range(0; $g | length)] == [$g[].sequence])' \
        "exactly 9 traces profiled, each with sequences 0..n-1" "$T/prof.json"
    ;;
*) fail "unknown mode $MODE" ;;
esac
echo "PASS ($E2E_NAME)"
