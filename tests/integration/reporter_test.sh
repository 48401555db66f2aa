#!/bin/sh
# reporter_test.sh - end-to-end tests of swagent-reporter against collector-stub, with rings
# written by reporter_producer (a stand-in for a traced process).
#
#   reporter_test.sh MODE REPORTER STUB PRODUCER CLI [EMPTY_LIB]
#
# MODE: gzip, plain, auth, reconnect, multi, collectors, idle, idle_race (a ring that appears
# while an idle reporter is leaving is served), rmdir, second, batch, nosync,
# stream, discard, status (the status file is rewritten when it changes, not every second
# while nothing does; in place, two inodes taking turns), scan (an idle reporter lists its
# rings once a second, not five times, and still finds a new one at once), run (EMPTY_LIB: a
# harmless .so that stands in for libswagent.so), yield and yield_stream (EMPTY_LIB:
# yield_count.c's shim, which counts the reporter's own sched_yield() calls), e2e (AGENT_LIB:
# the real libswagent.so; curl under `swagent run` against python3 -m http.server, the reporter
# started on demand by the agent). Every wait is bounded, every process started here is stopped by its PID (trap), and
# everything lives in a private temp dir.
set -u
MODE=$1 REPORTER=$2 STUB=$3 PRODUCER=$4 CLI=$5 EMPTY_LIB=${6:-} AGENT_LIB=${7:-}
T=$(mktemp -d /tmp/swrep.XXXXXX) || exit 1
chmod 700 "$T"
RUN=$T/run
mkdir -m 700 "$RUN"
: >"$T/agent.config"
# Isolate from any agent.config or environment of the machine running the tests.
export SW_AGENT_CONFIG="$T/agent.config"
export SW_AGENT_COLLECTOR_HEARTBEAT_PERIOD=1
unset SW_AGENT_AUTHENTICATION SW_AGENT_GRPC_GZIP SW_AGENT_GRPC_BATCH SW_AGENT_FORCE_TLS LD_PRELOAD
PIDS=""
COUNT=50
SVC=producer-svc

cleanup() {
    # A reporter the agent started on demand: its pid is in its log.
    if [ -f "$RUN/swagent-reporter.log" ]; then
        for p in $(sed -n 's/.*reporter [0-9.]* started: pid \([0-9]*\),.*/\1/p' "$RUN/swagent-reporter.log"); do
            PIDS="$PIDS $p"
        done
    fi
    for p in $PIDS; do kill "$p" 2>/dev/null; done
    i=0
    while [ $i -lt 20 ]; do
        alive=""
        for p in $PIDS; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ -z "$alive" ] && break
        sleep 0.1
        i=$((i + 1))
    done
    for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT INT TERM

fail() {
    echo "FAIL ($MODE): $*"
    for f in "$RUN"/*.log "$T"/stub.err "$T"/reporter.err "$T"/seg.json "$T"/mgmt.json; do
        [ -f "$f" ] && { echo "--- $f"; tail -n 30 "$f"; }
    done
    exit 1
}

# wait_for 'shell condition' SECONDS
wait_for() {
    n=0
    while ! eval "$1"; do
        n=$((n + 1))
        [ $n -gt $(($2 * 10)) ] && return 1
        sleep 0.1
    done
    return 0
}

lines() { [ -f "$1" ] && wc -l <"$1" | tr -d ' ' || echo 0; }

start_stub() { # [PORT] [extra args]
    port=${1:-0}
    [ $# -gt 0 ] && shift
    rm -f "$T/port"
    "$STUB" --listen "127.0.0.1:$port" --port-file "$T/port" --segments "$T/seg.json" \
        --management "$T/mgmt.json" "$@" 2>>"$T/stub.err" &
    STUB_PID=$!
    PIDS="$PIDS $STUB_PID"
    wait_for "[ -s '$T/port' ]" 10 || fail "collector-stub did not start"
    PORT=$(cat "$T/port")
}

# check_delivered N SECONDS: the status file says sent=N within SECONDS, and the stub got N
# segments, all distinct.
check_delivered() {
    wait_for "grep -q 'sent=$1 ' '$RUN/reporter-127.0.0.1_$PORT.status' 2>/dev/null" "$2" ||
        fail "status file does not say sent=$1"
    sleep 1
    [ "$(lines "$T/seg.json")" -eq "$1" ] || fail "expected $1 segments, got $(lines "$T/seg.json")"
    ids=$(jq -r .traceSegmentId "$T/seg.json" | sort -u | wc -l)
    [ "$ids" -eq "$1" ] || fail "expected $1 distinct segment ids, got $ids"
}

start_producer() { # COUNT LINGER [extra args]
    c=$1 l=$2
    shift 2
    "$PRODUCER" --dir "$RUN" --count "$c" --linger "$l" --collector "127.0.0.1:$PORT" \
        --service "$SVC" "$@" >"$T/producer.out" &
    PROD_PID=$!
    PIDS="$PIDS $PROD_PID"
    wait_for "grep -q ready '$T/producer.out'" 10 || fail "producer did not get ready"
}

start_reporter() { # [args]
    "$REPORTER" --foreground --runtime-dir "$RUN" --collector "127.0.0.1:$PORT" "$@" \
        2>>"$T/reporter.err" &
    REP_PID=$!
    PIDS="$PIDS $REP_PID"
}

# Checks that the stub received exactly the producer's COUNT segments, with the right fields.
check_segments() { # COUNT TAG PRODUCER_PID
    wait_for "[ \$(lines '$T/seg.json') -ge $1 ]" 20 || fail "only $(lines "$T/seg.json") of $1 segments arrived"
    n=$(jq -r 'select(.traceId | startswith("'"$2"'-trace-")) | .traceId' "$T/seg.json" | sort -u | wc -l)
    [ "$n" -eq "$1" ] || fail "expected $1 distinct trace ids, got $n"
    bad=$(jq -c 'select(.service != "'"$SVC"'" or .serviceInstance != "producer-inst-'"$3"'"
                 or (.spans | length) != 2
                 or (.traceSegmentId | startswith("'"$2"'-seg-") | not)
                 or ([.spans[] | select(.spanId == 0 and .parentSpanId == -1 and .spanType == "Entry")] | length) != 1
                 or ([.spans[] | select(.spanId == 1 and .peer == "backend:8080" and .isError == true)] | length) != 1)' \
        "$T/seg.json" | head -3)
    [ -z "$bad" ] || fail "malformed segments: $bad"
}

case "$MODE" in
gzip | plain)
    # plain: a service name with namespace and cluster (`name|ns|cluster`).
    # plain: gzip off through a config file given with --config.
    REP_ARGS=""
    if [ "$MODE" = plain ]; then
        SVC="plain-svc|ns1|cl1"
        printf 'swagent.grpc_gzip=false\n' >"$T/plain.config"
        REP_ARGS="--config $T/plain.config"
    fi
    start_stub
    # The producer lingers long enough to be seen live by `swagent status` on a loaded machine;
    # it is killed (no cleanup) once that is checked.
    start_producer $COUNT 60 --tag g --no-cleanup
    start_reporter $REP_ARGS
    check_segments $COUNT g "$PROD_PID"
    if [ "$MODE" = gzip ]; then
        grep -q "gzip-compressed" "$T/stub.err" || fail "messages did not arrive gzip-compressed"
    else
        grep -q "gzip-compressed" "$T/stub.err" && fail "messages arrived compressed with gzip off"
    fi
    # Heartbeats: properties first (language, hostname, Process No.), then keepAlive.
    wait_for "grep -q reportInstanceProperties '$T/mgmt.json'" 10 || fail "no reportInstanceProperties"
    props=$(grep reportInstanceProperties "$T/mgmt.json" | head -1)
    if [ "$MODE" = plain ]; then
        echo "$props" | jq -e '([.properties[] | select(.key == "namespace" and .value == "ns1")] | length) == 1
            and ([.properties[] | select(.key == "cluster" and .value == "cl1")] | length) == 1' \
            >/dev/null || fail "no namespace/cluster properties: $props"
    fi
    echo "$props" | jq -e '.service == "'"$SVC"'" and .serviceInstance == "producer-inst-'"$PROD_PID"'"
        and ([.properties[] | select(.key == "language" and .value == "native")] | length) == 1
        and ([.properties[] | select(.key == "hostname" and (.value | length) > 0)] | length) == 1
        and ([.properties[] | select(.key == "Process No." and .value == "'"$PROD_PID"'")] | length) == 1
        and ([.properties[] | select(.key == "OS Name" and .value == "Linux")] | length) == 1' \
        >/dev/null || fail "bad properties: $props"
    wait_for "grep -q keepAlive '$T/mgmt.json'" 10 || fail "no keepAlive"
    # swagent status shows the reporter and the live ring.
    wait_for "[ -f '$RUN/reporter-127.0.0.1_$PORT.status' ]" 5 || fail "no status file"
    "$CLI" status --runtime-dir "$RUN" >"$T/status.out" 2>&1 || fail "swagent status failed"
    grep -q "reporter-127.0.0.1_$PORT: running" "$T/status.out" || fail "status: $(cat "$T/status.out")"
    grep -q "pid $PROD_PID live service=$SVC" "$T/status.out" || fail "status: $(cat "$T/status.out")"
    grep -q "sent=$COUNT" "$T/status.out" || fail "status: $(cat "$T/status.out")"
    # The producer dies without cleaning up: its drained ring is removed.
    kill -9 "$PROD_PID" 2>/dev/null
    wait_for "! kill -0 $PROD_PID 2>/dev/null" 10 || fail "producer did not exit"
    wait_for "! ls '$RUN'/ring-*.swr >/dev/null 2>&1" 10 || fail "dead producer's ring not removed"
    [ "$(lines "$T/seg.json")" -eq $COUNT ] || fail "duplicate segments: $(lines "$T/seg.json")"
    ;;
auth)
    # The collector wants another token than the one configured: nothing is accepted and
    # nothing is released from the ring.
    start_stub 0 --auth other
    # A ring of a process configured with the token names the collector with its settings id
    # (the reporter key, config.h), as the agent does; `swagent status` says which.
    KEY=$(SW_AGENT_AUTHENTICATION=s3cret SW_AGENT_COLLECTOR_BACKEND_SERVICES=127.0.0.1:$PORT \
        "$CLI" status --runtime-dir "$RUN" | sed -n 's/^reporter key of this environment: \([^ ]*\) .*/\1/p')
    case $KEY in "127.0.0.1:$PORT+"????????) ;; *) fail "reporter key with a token: '$KEY'" ;; esac
    "$PRODUCER" --dir "$RUN" --count "$COUNT" --linger 6 --collector "$KEY" \
        --service "$SVC" --tag a >"$T/producer.out" &
    PROD_PID=$!
    PIDS="$PIDS $PROD_PID"
    wait_for "grep -q ready '$T/producer.out'" 10 || fail "producer did not get ready"
    SW_AGENT_AUTHENTICATION=s3cret start_reporter
    wait_for "grep -q 'status 7' '$RUN/swagent-reporter.log'" 10 || fail "no PERMISSION_DENIED in the log"
    [ "$(lines "$T/seg.json")" -eq 0 ] || fail "segments accepted with a wrong token"
    # The collector now takes our token: every segment still arrives (at-least-once).
    kill "$STUB_PID"
    wait_for "! kill -0 $STUB_PID 2>/dev/null" 10 || fail "stub did not stop"
    start_stub "$PORT" --auth s3cret
    check_segments $COUNT a "$PROD_PID"
    ;;
reconnect)
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    start_producer $COUNT 6 --tag r
    start_reporter
    sleep 2
    [ "$(lines "$RUN/swagent-reporter.log")" -gt 0 ] || fail "reporter did not start"
    grep -q "failed" "$RUN/swagent-reporter.log" || fail "no failed attempt logged before the collector started"
    start_stub "$PORT"
    check_segments $COUNT r "$PROD_PID"
    ;;
multi)
    # collector.backend_service lists a dead address first: the reporter moves on to the next.
    start_stub
    DEAD=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    REAL=$PORT
    PORT="$DEAD,127.0.0.1:$REAL"
    start_producer $COUNT 6 --tag m
    start_reporter
    check_segments $COUNT m "$PROD_PID"
    grep -q "switching to collector address 127.0.0.1:$REAL" "$RUN/swagent-reporter.log" ||
        fail "no switch to the second address logged"
    ;;
run)
    # swagent run: LD_PRELOAD (SWAGENT_LIB), service, collector and config reach the command.
    out=$(SWAGENT_LIB="$EMPTY_LIB" "$CLI" run --service svc-a --collector 127.0.0.1:1 \
        --config "$T/agent.config" -- sh -c 'echo "$LD_PRELOAD|$SW_AGENT_NAME|$SW_AGENT_COLLECTOR_BACKEND_SERVICES|$SW_AGENT_CONFIG"')
    case "$out" in
    */"$(basename "$EMPTY_LIB")"\|svc-a\|127.0.0.1:1\|"$T/agent.config") ;;
    *) fail "swagent run environment: $out" ;;
    esac
    SWAGENT_LIB="$EMPTY_LIB" "$CLI" run -- sh -c 'exit 7'
    [ $? -eq 7 ] || fail "swagent run did not pass the exit status on"
    SWAGENT_LIB=/nonexistent/libswagent.so "$CLI" run -- true 2>/dev/null && fail "missing library accepted"
    "$CLI" status --runtime-dir "$RUN" >"$T/status.out" || fail "swagent status failed"
    grep -q "none" "$T/status.out" || fail "status of an empty runtime dir: $(cat "$T/status.out")"
    ;;
collectors)
    # Two collectors, one runtime dir: each reporter takes only the rings of its collector,
    # including rings that were there before it started (the second reporter starts while the
    # first collector's ring is still full).
    start_stub
    PORT1=$PORT
    start_producer $COUNT 6 --tag c1
    P1=$PROD_PID
    mv "$T/port" "$T/port1"
    "$STUB" --listen 127.0.0.1:0 --port-file "$T/port" --segments "$T/seg2.json" 2>>"$T/stub.err" &
    PIDS="$PIDS $!"
    wait_for "[ -s '$T/port' ]" 10 || fail "second collector-stub did not start"
    PORT2=$(cat "$T/port")
    "$PRODUCER" --dir "$RUN" --count 20 --linger 6 --collector "127.0.0.1:$PORT2" --tag c2 \
        --service "$SVC" >"$T/producer2.out" &
    P2=$!
    PIDS="$PIDS $P2"
    wait_for "grep -q ready '$T/producer2.out'" 10 || fail "producer 2 did not get ready"
    PORT=$PORT2
    start_reporter
    wait_for "[ \$(lines '$T/seg2.json') -ge 20 ]" 20 || fail "second collector got $(lines "$T/seg2.json") of 20"
    sleep 1
    jq -e 'select(.traceId | startswith("c2-") | not)' "$T/seg2.json" >/dev/null &&
        fail "the second reporter took the first collector's ring (adopted before its collector filter applied?)"
    PORT=$PORT1
    start_reporter
    check_segments $COUNT c1 "$P1"
    sleep 1
    n1=$(lines "$T/seg.json") n2=$(lines "$T/seg2.json")
    [ "$n1" -eq $COUNT ] || fail "first collector got $n1 segments, expected $COUNT"
    [ "$n2" -eq 20 ] || fail "second collector got $n2 segments, expected 20"
    jq -e 'select(.traceId | startswith("c2-") | not)' "$T/seg2.json" >/dev/null &&
        fail "second collector got another collector's segments"
    ;;
e2e)
    start_stub
    python3 -m http.server 0 --bind 127.0.0.1 >"$T/http.out" 2>&1 &
    HTTP_PID=$!
    PIDS="$PIDS $HTTP_PID"
    wait_for "grep -q 'port [0-9]' '$T/http.out'" 10 || fail "http.server did not start"
    HPORT=$(sed -n 's/.*port \([0-9]*\).*/\1/p' "$T/http.out" | head -1)
    export SW_AGENT_RUNTIME_DIR="$RUN" SW_AGENT_REPORTER_PATH="$REPORTER" SW_AGENT_REPORTER_IDLE_EXIT=2
    code=$(SWAGENT_LIB="$AGENT_LIB" "$CLI" run --service e2e-curl --collector "127.0.0.1:$PORT" -- \
        curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$HPORT/")
    [ "$code" = 200 ] || fail "curl under the agent: $code"
    wait_for "[ \$(lines '$T/seg.json') -ge 1 ]" 20 || fail "no segment from curl"
    jq -e 'select(.service == "e2e-curl") | .spans[] | select(.spanType == "Exit" and .peer == "127.0.0.1:'"$HPORT"'")' \
        "$T/seg.json" >/dev/null || fail "no exit span to the http server: $(cat "$T/seg.json")"
    # The on-demand reporter removes the ring of the exited curl and exits when idle.
    wait_for "! ls '$RUN'/ring-*.swr >/dev/null 2>&1" 10 || fail "curl's ring not removed"
    wait_for "grep -q 'exiting (sent' '$RUN/swagent-reporter.log'" 20 || fail "reporter did not idle-exit"
    ;;
idle)
    start_stub
    start_producer 5 1 --tag i
    # As when started on demand: no --foreground; idle exit after 1 s without traced processes.
    "$REPORTER" --runtime-dir "$RUN" --collector "127.0.0.1:$PORT" --idle-exit 1 \
        2>>"$T/reporter.err" &
    REP_PID=$!
    PIDS="$PIDS $REP_PID"
    check_segments 5 i "$PROD_PID"
    wait_for "! kill -0 $REP_PID 2>/dev/null" 15 || fail "reporter did not exit when idle"
    wait "$REP_PID"
    rc=$?
    [ $rc -eq 0 ] || fail "idle exit status $rc"
    ls "$RUN"/ring-*.swr >/dev/null 2>&1 && fail "ring left behind"
    ;;
idle_race)
    # A ring created while an idle reporter is leaving, its lock still held, is served: its
    # process found the lock held and started no reporter (reporter_producer starts none at
    # all). The reporter holds its exit there (--test-exit-pause-ms) while the ring appears;
    # it then releases the lock, sees the directory changed, takes the lock back and stays.
    # It used to exit, and the segments waited in the ring.
    start_stub
    "$REPORTER" --runtime-dir "$RUN" --collector "127.0.0.1:$PORT" --idle-exit 1 \
        --test-exit-pause-ms 1500 2>>"$T/reporter.err" &
    REP_PID=$!
    PIDS="$PIDS $REP_PID"
    wait_for "grep -q 'before the lock is released' '$RUN/swagent-reporter.log'" 15 || fail "the reporter did not reach its idle exit"
    start_producer 5 3 --tag r
    check_segments 5 r "$PROD_PID"
    grep -q "directory changed while leaving" "$RUN/swagent-reporter.log" || fail "no second look"
    # Once the producer is gone, the reporter leaves (a status file of its own is never left).
    wait_for "! kill -0 $REP_PID 2>/dev/null" 20 || fail "reporter did not exit when idle again"
    wait "$REP_PID"
    rc=$?
    [ $rc -eq 0 ] || fail "idle exit status $rc"
    ls "$RUN"/reporter-*.status >/dev/null 2>&1 && fail "status file left behind"
    ls "$RUN"/ring-*.swr >/dev/null 2>&1 && fail "ring left behind"
    ;;
status)
    # An idle reporter leaves its status file alone (it wrote the same file every second: a new
    # inode and an ext4 journal entry each time); a change is written within about a second.
    start_stub
    start_producer 5 30 --tag s
    start_reporter
    check_segments 5 s "$PROD_PID"
    wait_for "grep -q '^sent=5 ' '$RUN'/reporter-*.status" 5 || fail "status: $(cat "$RUN"/reporter-*.status)"
    sleep 1.5 # the counters' last change is written
    i1=$(stat -c %i "$RUN"/reporter-*.status)
    sleep 3.5
    i2=$(stat -c %i "$RUN"/reporter-*.status)
    [ "$i1" = "$i2" ] || fail "the status file was rewritten while nothing changed (inode $i1 -> $i2)"
    PROD1=$PROD_PID
    start_producer 3 30 --tag t
    wait_for "grep -q '^sent=8 ' '$RUN'/reporter-*.status" 5 || fail "the change was not written: $(cat "$RUN"/reporter-*.status)"
    [ "$(stat -c %i "$RUN"/reporter-*.status)" != "$i2" ] || fail "same inode after a change"
    kill "$PROD1" "$PROD_PID"
    # While segments flow, the file changes every second: it is written in place into the
    # second inode and the two names swapped (a new file renamed over it made ext4 write a
    # block to the disk every second). Two inodes take turns; a reader always finds a whole file.
    start_producer 150 30 --tag u --interval-ms 25
    w0=$(sed -n 's/^write_bytes: //p' /proc/$REP_PID/io)
    inodes="" n=0 torn=0
    while [ $n -lt 40 ]; do
        f=$(ls "$RUN"/reporter-*.status)
        inodes="$inodes $(stat -c %i "$f")"
        content=$(cat "$f"; echo x)
        case "$content" in
        pid=*"
x") ;;
        *) torn=$((torn + 1)) ;;
        esac
        sleep 0.1
        n=$((n + 1))
    done
    w1=$(sed -n 's/^write_bytes: //p' /proc/$REP_PID/io)
    wait_for "grep -q '^sent=158 ' '$RUN'/reporter-*.status" 10 || fail "status: $(cat "$RUN"/reporter-*.status)"
    distinct=$(echo $inodes | tr ' ' '\n' | sort -u | wc -l)
    echo "# status: $distinct inodes named the status file in 4 s of changes, $((w1 - w0)) bytes to the disk ($(stat -f -c %T "$RUN"))"
    [ "$distinct" -le 2 ] || fail "$distinct inodes named the status file in 4 s: a new file per rewrite"
    [ $torn -eq 0 ] || fail "$torn reads of an incomplete status file"
    ls "$RUN"/reporter-*.status.next >/dev/null 2>&1 || fail "no .next file beside the status file"
    kill "$PROD_PID"
    kill "$REP_PID"
    wait_for "! kill -0 $REP_PID 2>/dev/null" 10 || fail "reporter did not exit"
    ls "$RUN"/reporter-*.status* >/dev/null 2>&1 && fail "status files left at exit: $(ls "$RUN")"
    ;;
scan)
    # Idle, the rings are scanned once a second: each scan reads the producer's
    # /proc/<pid>/stat, the only read(2) an idle reporter makes (/proc/<pid>/io: syscr). It
    # was five scans a second. A new producer's ring is still found at once (the directory
    # changed), and its segments are sent.
    start_stub
    start_producer 5 30 --tag s
    PROD1=$PROD_PID
    start_reporter
    check_segments 5 s "$PROD_PID"
    sleep 1
    r1=$(sed -n 's/^syscr: //p' /proc/$REP_PID/io)
    sleep 4
    r2=$(sed -n 's/^syscr: //p' /proc/$REP_PID/io)
    echo "# scan: $((r2 - r1)) read(2) calls in 4 s while idle"
    [ $((r2 - r1)) -le 10 ] || fail "$((r2 - r1)) reads in 4 s: the rings were scanned more than about once a second"
    start_producer 3 30 --tag t
    wait_for "[ \$(lines '$T/seg.json') -ge 8 ]" 3 || fail "a new producer's segments were not sent within 3 s"
    kill "$PROD1" "$PROD_PID"
    ;;
rmdir)
    # The runtime directory is deleted under a running reporter: it leaves (a new reporter
    # would take a new lock, and two consumers must never share a ring).
    start_stub
    start_producer 5 10 --tag d
    start_reporter
    check_segments 5 d "$PROD_PID"
    mv "$RUN/swagent-reporter.log" "$T/reporter.log"
    rm -rf "$RUN"
    wait_for "! kill -0 $REP_PID 2>/dev/null" 10 || fail "reporter kept running without its runtime dir"
    wait "$REP_PID"
    rc=$?
    [ $rc -eq 0 ] || fail "exit status $rc"
    grep -q "removed or replaced; exiting" "$T/reporter.log" || fail "no log line"
    mkdir -m 700 "$RUN"
    ;;
batch | nosync | stream)
    # Segments in SegmentCollections on collectInSync (batch, the default); against a collector
    # answering UNIMPLEMENTED for collectInSync (nosync: collector-stub --no-sync), the reporter
    # falls back to the collect stream once, for good; swagent.grpc_batch=false (stream) uses
    # the collect stream from the start. Every segment arrives exactly once, in several batches
    # (up to 2,000 segments each: the ring is full before the reporter starts, so 3 calls).
    N=5000
    STUB_ARGS=""
    [ "$MODE" = nosync ] && STUB_ARGS="--no-sync"
    [ "$MODE" = stream ] && printf 'swagent.grpc_batch=false\n' >"$T/agent.config"
    start_stub 0 $STUB_ARGS
    start_producer $N 60 --tag b --ring-bytes 4194304
    start_reporter
    check_segments $N b "$PROD_PID"
    check_delivered $N 10
    # gzip is on: the stub logs every message with its method.
    sync=$(grep -c 'collectInSync: message 1 arrived gzip' "$T/stub.err")
    coll=$(grep -c 'TraceSegmentReportService/collect: message [0-9]* arrived gzip' "$T/stub.err")
    refused=$(grep -c 'collectInSync is disabled' "$T/stub.err")
    fallback=$(grep -c 'answered UNIMPLEMENTED for collectInSync' "$RUN/swagent-reporter.log")
    case $MODE in
    batch)
        [ "$sync" -ge 3 ] || fail "$sync collectInSync messages for $N segments (batches of 2,000)"
        [ "$sync" -le 4 ] || fail "$sync collectInSync messages for $N segments: batches too small"
        [ "$coll" -eq 0 ] || fail "$coll segments sent on the collect stream"
        grep -q 'segments batched (collectInSync)' "$RUN/swagent-reporter.log" ||
            fail "no batched mode in the reporter log"
        ;;
    nosync)
        [ "$refused" -eq 1 ] || fail "collectInSync tried $refused times (expected once)"
        [ "$fallback" -eq 1 ] || fail "fallback logged $fallback times (expected once)"
        [ "$coll" -eq $N ] || fail "$coll of $N segments on the collect stream"
        [ "$sync" -eq 0 ] || fail "collectInSync accepted with --no-sync"
        ;;
    stream)
        [ "$sync" -eq 0 ] && [ "$refused" -eq 0 ] || fail "collectInSync used with grpc_batch=false"
        [ "$coll" -eq $N ] || fail "$coll of $N segments on the collect stream"
        grep -q 'segments streamed (collect)' "$RUN/swagent-reporter.log" ||
            fail "no streamed mode in the reporter log"
        ;;
    esac
    grep -q 'failed' "$RUN/swagent-reporter.log" && fail "a failed call logged"
    ;;
yield | yield_stream)
    # The reporter gives the CPU back while it works through a batch (SW_YIELD_EVERY, transport.h):
    # a sched_yield() every 128 segments it encodes and one before each message's gzip, so that
    # an application thread already waiting for the CPU gets it (a SCHED_IDLE reporter is
    # preempted by a waking thread, not by one that is already runnable). 5,000 segments in the
    # ring before it starts: batches of 2,000, 2,000 and 1,000, 15 + 15 + 7 yields while
    # encoding and 3 before their messages' gzip: 40 (a split into a fourth, small batch gives
    # the same; 37 without the yields before gzip, 0 without any). yield_stream: on the collect stream (swagent.grpc_batch=false) a message
    # per segment, made in a loop that yields every 128 too: 37 more (74 seen; 37 without that
    # loop's). The 6th argument is the counting shim (yield_count.c).
    # MAX: a yield per segment (5,000), or per message on the stream, is far above it; a
    # batch split by timing into one more message adds one yield before its gzip.
    N=5000
    MIN=40
    MAX=44
    if [ "$MODE" = yield_stream ]; then
        printf 'swagent.grpc_batch=false\n' >"$T/agent.config"
        MIN=70
        MAX=80
    fi
    start_stub
    start_producer $N 60 --tag y --ring-bytes 4194304
    LD_PRELOAD=$EMPTY_LIB SW_TEST_YIELD_FILE=$T/yields "$REPORTER" --foreground \
        --runtime-dir "$RUN" --collector "127.0.0.1:$PORT" 2>>"$T/reporter.err" &
    REP_PID=$!
    PIDS="$PIDS $REP_PID"
    check_delivered $N 10
    kill "$REP_PID"
    wait_for "[ -s '$T/yields' ]" 10 || fail "the reporter did not write its yield count"
    y=$(cat "$T/yields")
    echo "yield: $y sched_yield() calls for $N segments"
    [ "$y" -ge $MIN ] && [ "$y" -le $MAX ] ||
        fail "$y sched_yield() calls for $N segments (expected $MIN to $MAX)"
    ;;
bigbatch)
    # Big segments (an 8,000-byte tag each): one batch (up to 2,000 segments) is split into
    # messages of at most 2 MiB (transport.c), under the 4 MiB that gRPC servers accept by
    # default, so 600 segments (~4.9 MB) go in at least 3 calls, every one arriving once.
    N=600
    start_stub
    start_producer $N 60 --tag g --ring-bytes 8388608 --pad 8000
    start_reporter
    check_delivered $N 30
    [ "$(jq -r '.spans[] | select(.spanId == 0) | .tags[] | select(.key == "pad") | .value | length' "$T/seg.json" | sort -u)" = 8000 ] ||
        fail "the pad tag did not arrive whole"
    sync=$(grep -c 'collectInSync: message 1 arrived gzip' "$T/stub.err")
    echo "bigbatch: $sync collectInSync calls for $N segments of ~8 KB"
    [ "$sync" -ge 3 ] || fail "$sync collectInSync calls for ~4.9 MB of segments: over 2 MiB per call"
    max=$(grep 'collectInSync: message 1 arrived' "$T/stub.err" | sed -n 's/.*, \([0-9]*\) inflated.*/\1/p' | sort -n | tail -1)
    [ "${max:-0}" -gt 0 ] && [ "$max" -le $((2 * 1024 * 1024)) ] || fail "a message of $max bytes (over 2 MiB)"
    grep -q 'failed' "$RUN/swagent-reporter.log" && fail "a failed call logged"
    ;;
trickle)
    # A slow trickle (a segment every 25 ms for 2 s) is gathered: a batch a second (or when
    # 512 KiB wait), not one call per few passes (was one per 200 ms), and while a batch is
    # held the reporter's thread wakes every 100 ms (was 20 ms); every segment still arrives
    # within a few seconds of its commit.
    start_stub
    start_reporter
    sleep 0.5
    wakes() { awk '/^voluntary_ctxt_switches/ {print $2}' "/proc/$REP_PID/task/$REP_PID/status"; }
    w0=$(wakes)
    start_producer 80 60 --tag k --interval-ms 25
    w1=$(wakes)
    wait_for "[ \$(lines '$T/seg.json') -ge 80 ]" 4 || fail "only $(lines "$T/seg.json") of 80 segments 4 s after the last commit"
    check_segments 80 k "$PROD_PID"
    sync=$(grep -c 'collectInSync: message 1 arrived gzip' "$T/stub.err")
    echo "trickle: $sync collectInSync calls for 80 segments over 2 s, $((w1 - w0)) wake-ups of the reporter's thread meanwhile"
    [ "$sync" -le 5 ] || fail "$sync collectInSync calls for 80 segments over 2 s: not gathered"
    [ "$sync" -ge 2 ] || fail "$sync collectInSync calls: held until the end"
    [ $((w1 - w0)) -le 60 ] || fail "$((w1 - w0)) wake-ups of the reporter while it held batches"
    ;;
discard)
    # collector-stub --discard parses and counts the segments of the collectInSync batches
    # without writing them, and logs the totals when it stops.
    N=1200
    start_stub 0 --discard
    start_producer $N 60 --tag x --ring-bytes 4194304
    start_reporter
    wait_for "grep -q 'sent=$N ' '$RUN/reporter-127.0.0.1_$PORT.status' 2>/dev/null" 20 ||
        fail "reporter did not deliver $N segments"
    kill "$STUB_PID"
    wait_for "grep -q 'collector-stub: stopped' '$T/stub.err'" 10 || fail "stub did not stop"
    grep -q "received $N segment(s) in [0-9]* message(s) ([0-9]* wire bytes), refused 0 message(s)" \
        "$T/stub.err" || fail "no or wrong totals: $(grep received "$T/stub.err")"
    [ "$(lines "$T/seg.json")" -eq 0 ] || fail "segments written with --discard"
    grep -q 'TraceSegmentReportService/.*gzip-compressed' "$T/stub.err" &&
        fail "per-message lines logged with --discard"
    ;;
second)
    start_stub
    start_reporter
    FIRST=$REP_PID
    wait_for "[ -f '$RUN/reporter-127.0.0.1_$PORT.status' ]" 10 || fail "first reporter not up"
    start_reporter
    wait_for "! kill -0 $REP_PID 2>/dev/null" 5 || fail "second reporter did not exit"
    wait "$REP_PID"
    rc=$?
    [ $rc -eq 0 ] || fail "second reporter exit status $rc"
    kill -0 "$FIRST" 2>/dev/null || fail "first reporter died"
    grep -q "pid=$FIRST " "$RUN/reporter-127.0.0.1_$PORT.status" || fail "status file not the first's"
    ;;
*)
    echo "unknown mode $MODE"
    exit 2
    ;;
esac
echo "ok - reporter $MODE"
exit 0
