#!/bin/sh
# reliability_test.sh - collector outages, reporter kills, visible losses and TLS, with real
# traced programs (curl under libswagent.so, python3 http.server as the untraced backend), the
# reporter started on demand by the agent, and collector-stub.
#
#   reliability_test.sh MODE REPORTER STUB CLI AGENT_LIB [PRODUCER]
#
# MODE:
#   outage_start  collector down from the start: 800 requests from one long-lived traced curl
#                 (URL range, keep-alive) + 200 separate short-lived traced curl runs; then the
#                 collector starts: exactly the 1000 segment ids arrive, no duplicate.
#   outage_mid    the collector is SIGKILLed while traffic runs and comes back 4 s later: every
#                 segment arrives; duplicates only up to the failed streams' segments.
#   blackhole     the collector accepts TCP connections and never answers (a python listener):
#                 traced curls keep their normal latency, segments are spooled; then the real
#                 collector takes the port: every segment arrives.
#   kill          the reporter is SIGKILLed repeatedly while it spools and while it replays,
#                 restarted by the next traced process or by hand: every segment arrives.
#   spool_cap     a 4 KiB spool cap: the oldest files are dropped and counted; delivered +
#                 dropped = produced.
#   drops         a tiny ring (SW_AGENT_RING_BYTES=65536) overflows while the reporter is
#                 stopped (SIGSTOP): dropped > 0 in `swagent status` and in the instance
#                 properties the collector received (swagent.segments.dropped).
#   tls, mtls     TLS to collector-stub with a CA made here by openssl (PRODUCER writes rings):
#                 the right CA delivers; a wrong CA delivers nothing (records kept, delivered
#                 once the CA is fixed); mtls: no client cert is rejected, a client cert works.
#   slowlink      the collector behind a relay (slow_relay.py) that delays every chunk by 200 ms
#                 each way (PRODUCER writes rings): a 400 ms round trip, and a connection is
#                 ready only when the server's HTTP/2 SETTINGS have crossed the link (>= 200 ms).
#                 Every segment is delivered exactly once with no failed call, no failed
#                 heartbeat and nothing spooled.
#   slowlink_bulk a narrow link (slow_relay.py --rate: 100,000 bytes/s each way, 50 ms) that is
#                 down at first, so the first calls fail; then one batch of 500 segments of
#                 more than 2,000 bytes each (gzip off: over 1 MB on the wire), which needs
#                 about 10 s on that link, more than the 5 s deadline of a probe (a call after a
#                 failure). Every segment must arrive exactly once.
#   sigterm       SIGTERM, then SIGINT, while the reporter's first call waits (up to 5 s) for a
#                 connection that never completes: a listener that accepts and never answers,
#                 then one whose accept queue is full (the kernel drops the SYNs). Each reporter
#                 must exit within 2 s of the signal; the batch it held stays in the ring, and a
#                 reporter started once collector-stub is there delivers every segment exactly
#                 once.
#   partial       one batch of 1,500 segments of more than 2,000 bytes each (over 3 MiB) goes
#                 in two collectInSync calls (2 MiB at most each); collector-stub fails the
#                 second (--fail-calls 2). Only what the failed call carried may be sent again:
#                 every segment must arrive exactly once.
#   partial_replay the same for a spool file: 500 segments of more than 5,000 bytes each, spooled
#                 while the collector was down, are replayed in two calls and the second fails.
#                 The file is replayed again without what the first call delivered.
#   probe_ok      collector-stub answers the probes (empty calls) and the heartbeats (every
#                 second) but fails every batch (--fail-calls 1-): the reporter's backoff must
#                 keep growing (at most 10 failed batches in 8 s; restarting it at every answered
#                 probe gave one every ~0.1 s, and at every answered heartbeat about 30), and the
#                 heartbeats go on. Then a collector that accepts takes the port: every segment
#                 arrives once.
#   toolarge      a collector whose message limit is 8,000 bytes (collector-stub --max-message,
#                 RESOURCE_EXHAUSTED "Received message larger than max"): 300 small segments
#                 and 5 of more than 12,000 bytes. The refused batch goes again at once in
#                 smaller messages; each big segment, refused alone, is dropped and counted
#                 (it can never be delivered); the 300 arrive once, with no failed batch.
#   toolarge_spool the same for segments spooled while the collector was down (the producers
#                 exited): replayed in smaller messages, the big ones dropped, the spool emptied.
#   toolarge_java the same as toolarge with the refusal in grpc-java's words, as the OAP (a Java
#                 gRPC server) answers it ("gRPC message exceeds maximum size 8000: N"): it was
#                 an ordinary failure, so nothing was delivered. The messages go at once at
#                 the 8,000 bytes the refusal names. With SW_AGENT_GRPC_BATCH=false, on the
#                 collect stream: the segments before the big one were received, the big one
#                 is dropped, the rest goes on (it was retried whole for ever).
#   toolarge_rotate two collector addresses: the first refuses messages above 8,000 bytes, so
#                 300 segments go to it in smaller messages; then it dies and the reporter
#                 moves to the second, which has no such limit: 300 more reach it in full-size
#                 messages (the smaller size was kept for good, across the move, before).
#   bad_records   20 segments and, after each of the first 5, a record that does not parse as a
#                 segment; the collector is down at first, so the batch fails and is taken again
#                 several times. The 20 arrive once and the 5 are dropped and counted once each
#                 (they were counted again at every attempt).
# Every wait is bounded, every process started here is stopped by its PID, all files live in a
# private temp dir (kept for a look when KEEP=1 is in the environment).
set -u
MODE=$1 REPORTER=$2 STUB=$3 CLI=$4 AGENT_LIB=$5 PRODUCER=${6:-}
T=$(mktemp -d /tmp/swrel.XXXXXX) || exit 1
chmod 700 "$T"
RUN=$T/run
mkdir -m 700 "$RUN"
: >"$T/agent.config"
unset SW_AGENT_AUTHENTICATION SW_AGENT_GRPC_GZIP SW_AGENT_FORCE_TLS LD_PRELOAD SW_AGENT_SPOOL_DIR
export SW_AGENT_CONFIG="$T/agent.config" SW_AGENT_RUNTIME_DIR="$RUN"
export SW_AGENT_REPORTER_PATH="$REPORTER" SW_AGENT_REPORTER_IDLE_EXIT=60
export SW_AGENT_COLLECTOR_HEARTBEAT_PERIOD=1 SW_AGENT_COLLECTOR_GRPC_UPSTREAM_TIMEOUT=3
PIDS=""
STUB_PID=""

reporter_pids() {
    [ -f "$RUN/swagent-reporter.log" ] &&
        sed -n 's/.*reporter [0-9.]* started: pid \([0-9]*\),.*/\1/p' "$RUN/swagent-reporter.log"
}

cleanup() {
    for p in $(reporter_pids); do PIDS="$PIDS $p"; done
    for p in $PIDS; do kill -CONT "$p" 2>/dev/null; kill "$p" 2>/dev/null; done
    i=0
    while [ $i -lt 20 ]; do
        alive=""
        for p in $PIDS; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ -z "$alive" ] && break
        sleep 0.1
        i=$((i + 1))
    done
    for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
    [ -n "${KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT INT TERM

fail() {
    echo "FAIL ($MODE): $*"
    for f in "$RUN"/*.log "$RUN"/*.status "$T"/stub*.err "$T"/rep.err "$T"/relay.err; do
        [ -f "$f" ] && { echo "--- $f"; tail -n 40 "$f"; }
    done
    exit 1
}

wait_for() { # 'shell condition' SECONDS
    n=0
    while ! eval "$1"; do
        n=$((n + 1))
        [ $n -gt $(($2 * 10)) ] && return 1
        sleep 0.1
    done
    return 0
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Unique segment ids and all lines over every segments file the stubs wrote.
uniq_ids() { cat "$T"/seg*.json 2>/dev/null | jq -r '.traceSegmentId' | sort -u | wc -l | tr -d ' '; }
all_lines() { cat "$T"/seg*.json 2>/dev/null | wc -l | tr -d ' '; }

STUB_N=0
start_stub() { # PORT [args]
    port=$1
    shift
    STUB_N=$((STUB_N + 1))
    rm -f "$T/port"
    "$STUB" --listen "127.0.0.1:$port" --port-file "$T/port" --segments "$T/seg$STUB_N.json" \
        --management "$T/mgmt$STUB_N.json" "$@" 2>>"$T/stub$STUB_N.err" &
    STUB_PID=$!
    PIDS="$PIDS $STUB_PID"
    wait_for "[ -s '$T/port' ]" 10 || fail "collector-stub did not start"
    PORT=$(cat "$T/port")
}

# bad_listener silent|full PORT: a collector address that never completes a call, in the
# background as BH. silent: accepts connections and never reads or writes. full: its accept
# queue is full (backlog 0, one connection of its own queued and never accepted), so the kernel
# drops further SYNs, as a firewall or a dead host would.
bad_listener() {
    rm -f "$T/bad.ready"
    python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[2])))
held = []
if sys.argv[1] == "full":
    s.listen(0)
    held.append(socket.create_connection(("127.0.0.1", int(sys.argv[2]))))
else:
    s.listen(64)
open(sys.argv[3], "w").close()
while True:
    if sys.argv[1] == "full":
        time.sleep(110)
    else:
        c, _ = s.accept(); held.append(c)   # accept, never read, never write
' "$1" "$2" "$T/bad.ready" &
    BH=$!
    PIDS="$PIDS $BH"
    wait_for "[ -f '$T/bad.ready' ]" 10 || fail "the $1 listener did not start"
}

# start_producer PORT ARGS...: reporter_producer (in the background) commits its records into
# $RUN, for a collector at 127.0.0.1:PORT; returns once they are all committed.
PRODUCER_N=0
start_producer() {
    _port=$1
    shift
    PRODUCER_N=$((PRODUCER_N + 1))
    "$PRODUCER" --dir "$RUN" --collector "127.0.0.1:$_port" "$@" >"$T/producer$PRODUCER_N.out" &
    PIDS="$PIDS $!"
    wait_for "grep -q ready '$T/producer$PRODUCER_N.out'" 10 || fail "producer did not get ready"
}

# start_reporter PORT: swagent-reporter in the background, PID in R, collector 127.0.0.1:PORT.
start_reporter() {
    "$REPORTER" --foreground --runtime-dir "$RUN" --collector "127.0.0.1:$1" 2>>"$T/rep.err" &
    R=$!
    PIDS="$PIDS $R"
}

# expect_once N SECONDS [WHY]: N distinct segment ids arrive within SECONDS, then (a second
# later) none of them twice; WHY is added to the duplicates' failure. Sets u and a.
expect_once() {
    arrived "$1" "$2"
    [ "$a" -eq "$u" ] || fail "$((a - u)) duplicate segments${3:+: $3}"
}

start_backend() {
    python3 -m http.server 0 --bind 127.0.0.1 --directory "$T" >"$T/http.out" 2>&1 &
    PIDS="$PIDS $!"
    wait_for "grep -q 'port [0-9]' '$T/http.out'" 10 || fail "http.server did not start"
    HPORT=$(sed -n 's/.*port \([0-9]*\).*/\1/p' "$T/http.out" | head -1)
    : >"$T/index.html"
}

# traced [env...] -- command: runs a command under the agent, reporting to 127.0.0.1:$CPORT.
traced() {
    LD_PRELOAD="$AGENT_LIB" SW_AGENT_NAME=${SVC:-rel} \
        SW_AGENT_COLLECTOR_BACKEND_SERVICES="127.0.0.1:$CPORT" "$@"
}
# traced_bg: the same for `traced_bg CMD &`: exec keeps one PID, so the PID in $! (killed at
# exit) is CMD's and not that of the subshell a backgrounded function runs in.
traced_bg() {
    LD_PRELOAD="$AGENT_LIB" SW_AGENT_NAME=${SVC:-rel} \
        SW_AGENT_COLLECTOR_BACKEND_SERVICES="127.0.0.1:$CPORT" exec "$@"
}

short_curls() { # N TAG: N separate traced curl processes, one request each
    _k=1
    while [ "$_k" -le "$1" ]; do
        traced curl -s -o /dev/null "http://127.0.0.1:$HPORT/$2-$_k" || echo "curl $_k failed" >>"$T/curl.err"
        _k=$((_k + 1))
    done
}

long_curl() { # N TAG [curl args]: one traced curl making N requests (URL range, keep-alive)
    n=$1 tag=$2
    shift 2
    traced curl -s "$@" -o /dev/null "http://127.0.0.1:$HPORT/$tag-[1-$n]" || echo "long curl failed" >>"$T/curl.err"
}

# arrived N SECONDS: N distinct segment ids arrive within SECONDS, and a second later there are
# still exactly N; sets u (distinct ids) and a (all lines).
arrived() {
    wait_for "[ \$(uniq_ids) -ge $1 ]" "$2" || fail "only $(uniq_ids) of $1 segments arrived"
    sleep 1
    u=$(uniq_ids) a=$(all_lines)
    [ "$u" -eq "$1" ] || fail "expected $1 unique segment ids, got $u"
}

status_val() { # KEY: the value of KEY= in the reporter's status file (first occurrence)
    sed -n "s/.*[ ^]$1=\([0-9]*\).*/\1/p; s/^$1=\([0-9]*\).*/\1/p" "$RUN"/reporter-*.status 2>/dev/null | head -1
}

check_all() { # EXPECTED SECONDS [allow_dups]
    arrived "$1" "$2"
    if [ "${3:-}" = allow_dups ]; then
        f=$(status_val failed_segments)
        [ $((a - u)) -le "${f:-0}" ] || fail "$((a - u)) duplicates but only ${f:-0} segments in failed streams"
    else
        [ "$a" -eq "$u" ] || fail "$((a - u)) duplicate segments (no stream failed after the collector came back)"
    fi
    [ -s "$T/curl.err" ] && fail "traced curls failed: $(head -3 "$T/curl.err")"
    echo "# $MODE: $u unique segments, $a received; spooled=$(status_val spooled) replayed=$(status_val replayed) failed_segments=$(status_val failed_segments)"
}

case "$MODE" in
outage_start)
    start_backend
    CPORT=$(free_port)
    t0=$(date +%s.%N)
    long_curl 800 long &
    LC=$!
    short_curls 200 short
    wait $LC
    t1=$(date +%s.%N)
    echo "# 200 short traced curls + 800 keep-alive requests with the collector down: $(echo "$t1 - $t0" | bc 2>/dev/null || echo ?) s"
    wait_for "[ \"\$(status_val spooled)\" -ge 200 ] 2>/dev/null" 20 || fail "the exited curls' rings were not spooled (spooled=$(status_val spooled))"
    ls "$RUN"/spool-*/seg-*.swz >/dev/null 2>&1 || fail "no spool file"
    perm=$(stat -c %a "$RUN"/spool-127.0.0.1_$CPORT)
    [ "$perm" = 700 ] || fail "spool dir mode $perm"
    for f in "$RUN"/spool-*/seg-*.swz; do
        [ "$(stat -c %a "$f")" = 600 ] || fail "spool file mode $(stat -c %a "$f")"
        break
    done
    start_stub "$CPORT"
    check_all 1000 60
    [ "$(status_val replayed)" -eq "$(status_val spooled)" ] || fail "replayed $(status_val replayed) != spooled $(status_val spooled)"
    wait_for "! ls '$RUN'/spool-*/seg-* >/dev/null 2>&1" 10 || fail "spool files left after replay"
    ;;
outage_mid)
    start_backend
    CPORT=$(free_port)
    start_stub "$CPORT"
    long_curl 600 long --rate 60/s &
    LC=$!
    short_curls 100 short &
    SC=$!
    sleep 3
    kill -9 "$STUB_PID"
    sleep 4
    start_stub "$CPORT"
    wait $LC
    wait $SC
    check_all 700 60 allow_dups
    ;;
blackhole)
    start_backend
    CPORT=$(free_port)
    bad_listener silent "$CPORT"
    # Latency: 100 traced curls interleaved with 100 untraced ones, the collector a black hole.
    short_curls 1 warm
    i=1 tt=0 tu=0
    while [ $i -le 100 ]; do
        s=$(date +%s%N)
        traced curl -s -o /dev/null "http://127.0.0.1:$HPORT/bh-$i" || echo "curl $i failed" >>"$T/curl.err"
        m=$(date +%s%N)
        curl -s -o /dev/null "http://127.0.0.1:$HPORT/untraced-$i"
        e=$(date +%s%N)
        tt=$((tt + (m - s) / 1000000)) tu=$((tu + (e - m) / 1000000))
        i=$((i + 1))
    done
    long_curl 300 long
    echo "# blackhole: 100 traced curls took $tt ms in all, 100 untraced ones $tu ms"
    [ $tt -lt $((2 * tu + 3000)) ] || fail "traced curls took $tt ms against $tu ms untraced"
    wait_for "[ \"\$(status_val spooled)\" -ge 100 ] 2>/dev/null" 30 || fail "nothing spooled (spooled=$(status_val spooled))"
    grep -q "failed (status" "$RUN/swagent-reporter.log" || fail "no failed call logged"
    kill "$BH"
    wait "$BH" 2>/dev/null
    start_stub "$CPORT"
    check_all 401 60
    ;;
kill)
    start_backend
    CPORT=$(free_port)
    long_curl 300 long --rate 100/s &
    LC=$!
    # Kill the on-demand reporter at moments while it spools; the next traced curl restarts it.
    i=1
    while [ $i -le 6 ]; do
        short_curls 50 "k$i"
        for p in $(reporter_pids); do kill -9 "$p" 2>/dev/null; done
        i=$((i + 1))
    done
    wait $LC
    short_curls 1 last # restarts a reporter
    # Wait until that reporter runs and has spooled (its own status file), then kill it too.
    wait_for "L=\$(reporter_pids | tail -1); [ -n \"\$L\" ] && grep -q \"^pid=\$L \" '$RUN'/reporter-*.status && [ \"\$(status_val spooled)\" -ge 1 ]" 20 ||
        fail "no reporter spooled"
    # A reporter being started may log its pid only after the kill: kill until none is left.
    kill_all_reporters() {
        for p in $(reporter_pids); do kill -9 "$p" 2>/dev/null; done
        for p in $(reporter_pids); do kill -0 "$p" 2>/dev/null && return 1; done
        return 0
    }
    wait_for kill_all_reporters 30 || fail "a reporter survived SIGKILL for 30 s"
    sleep 0.5
    kill_all_reporters || fail "a reporter started after the kill"
    start_stub "$CPORT"
    # Start a reporter by hand and SIGKILL it 0, 20, ... 140 ms (+ up to 9 ms at random) after
    # its start (start, connect, replay), eight times; then let the last one finish.
    k=0
    while [ $k -le 8 ]; do
        "$REPORTER" --runtime-dir "$RUN" --collector "127.0.0.1:$CPORT" --idle-exit 60 2>>"$T/rep.err" &
        R=$!
        PIDS="$PIDS $R"
        [ $k -eq 8 ] && break
        r=$(od -An -N1 -tu1 /dev/urandom | tr -d ' ')
        ms=$((k * 20 + r % 10))
        sleep "$(printf '0.%03d' $ms)"
        kill -9 "$R" 2>/dev/null
        wait "$R" 2>/dev/null
        echo "# kill: reporter SIGKILLed after $ms ms with $(uniq_ids) unique / $(all_lines) received"
        k=$((k + 1))
    done
    wait_for "[ \$(uniq_ids) -ge 601 ]" 60 || fail "only $(uniq_ids) of 601 segments arrived"
    sleep 1
    u=$(uniq_ids)
    [ "$u" -eq 601 ] || fail "expected 601 unique segment ids, got $u"
    [ -s "$T/curl.err" ] && fail "traced curls failed: $(head -3 "$T/curl.err")"
    echo "# kill: $u unique segments, $(all_lines) received (duplicates allowed: the reporter was killed mid-delivery)"
    ;;
spool_cap)
    # A 4 KiB spool cap with the collector down: the oldest spool files are dropped, and every
    # segment is either delivered or counted as dropped (spool_dropped), never silently lost.
    export SW_AGENT_SPOOL_MAX_BYTES=4096
    start_backend
    CPORT=$(free_port)
    short_curls 100 cap
    wait_for "[ \"\$(status_val spooled)\" -ge 100 ] 2>/dev/null" 30 || fail "not all spooled (spooled=$(status_val spooled))"
    d=$(status_val spool_dropped)
    [ "${d:-0}" -gt 0 ] || fail "nothing dropped over a 4 KiB cap"
    grep -q "over swagent.spool_max_bytes" "$RUN/swagent-reporter.log" || fail "no log line for the cap"
    b=$(status_val spool_bytes)
    [ "$b" -le 4096 ] || fail "spool holds $b bytes over a 4096 cap"
    start_stub "$CPORT"
    wait_for "[ \$(uniq_ids) -ge $((100 - d)) ]" 30 || fail "only $(uniq_ids) of $((100 - d)) arrived"
    sleep 1
    [ "$(uniq_ids)" -eq $((100 - d)) ] || fail "$(uniq_ids) arrived, expected 100 - $d dropped"
    echo "# spool_cap: 100 segments, $d dropped by the 4 KiB cap (counted), $(uniq_ids) delivered"
    ;;
drops)
    # 600 requests into a 64 KiB ring with the reporter stopped: once the ring has no room for
    # another segment, new traces are shed (not sampled, counted, reported to the collector as
    # swagent.segments.shed); no segment that was started is dropped, and every committed one
    # is delivered when the reporter runs again.
    CPORT=$(free_port)
    start_stub "$CPORT"
    export SW_AGENT_RING_BYTES=65536 SW_AGENT_COLLECTOR_PROPERTIES_REPORT_PERIOD_FACTOR=1000
    SVC=dropper traced_bg python3 -m http.server 0 --bind 127.0.0.1 --directory "$T" >"$T/http.out" 2>&1 &
    PIDS="$PIDS $!"
    wait_for "grep -q 'port [0-9]' '$T/http.out'" 10 || fail "http.server did not start"
    HPORT=$(sed -n 's/.*port \([0-9]*\).*/\1/p' "$T/http.out" | head -1)
    : >"$T/index.html"
    curl -s -o /dev/null "http://127.0.0.1:$HPORT/first" # its first segment starts the reporter
    wait_for "[ -n \"\$(reporter_pids)\" ]" 10 || fail "no reporter started"
    wait_for "grep -q reportInstanceProperties '$T/mgmt1.json'" 10 || fail "no first properties report"
    for p in $(reporter_pids); do kill -STOP "$p"; done
    curl -s -o /dev/null "http://127.0.0.1:$HPORT/d-[1-600]" # untraced client
    for p in $(reporter_pids); do kill -CONT "$p"; done
    wait_for "jq -e 'select(.method == \"reportInstanceProperties\") | .properties[] | select(.key == \"swagent.segments.shed\" and (.value | tonumber) > 0)' '$T/mgmt1.json' >/dev/null 2>&1" 15 ||
        fail "no swagent.segments.shed > 0 reported: $(tail -2 "$T/mgmt1.json")"
    grep -q "segment ring is nearly full" "$RUN/swagent.log" || fail "no log line for the full ring"
    "$CLI" status --runtime-dir "$RUN" >"$T/status.out" 2>&1 || fail "swagent status failed"
    pval() { sed -n "s/.*process pid=[0-9]* service=dropper .* $1=\([0-9]*\).*/\1/p" "$T/status.out" | head -1; }
    c=$(pval committed) d=$(pval dropped) s=$(pval shed)
    [ "${s:-0}" -gt 0 ] || fail "swagent status shows nothing shed: $(cat "$T/status.out")"
    [ "${d:-1}" -eq 0 ] || fail "$d started segments dropped at the ring: $(cat "$T/status.out")"
    [ $((c + s)) -eq 601 ] || fail "committed $c + shed $s != 601 requests"
    grep -Eq "pid [0-9]+ live service=dropper .* dropped=0 shed=$s " "$T/status.out" ||
        fail "the ring line of swagent status: $(grep service=dropper "$T/status.out")"
    arrived "$c" 20
    echo "# drops: 600 requests into a 64 KiB ring with the reporter stopped: committed=$c shed=$s dropped=$d, $(uniq_ids) delivered"
    ;;
tls | mtls)
    command -v openssl >/dev/null || { echo "SKIP: openssl missing"; exit 77; }
    P=$T/pki
    mkdir "$P"
    mkca() { # NAME
        openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$1" \
            -keyout "$P/$1.key" -out "$P/$1.crt" 2>/dev/null || fail "openssl CA $1"
    }
    mkcert() { # NAME CA EXT
        openssl req -newkey rsa:2048 -nodes -subj "/CN=$1" -keyout "$P/$1.key" -out "$P/$1.csr" 2>/dev/null &&
            printf '%s\n' "$3" >"$P/$1.ext" &&
            openssl x509 -req -in "$P/$1.csr" -CA "$P/$2.crt" -CAkey "$P/$2.key" -CAcreateserial \
                -days 2 -extfile "$P/$1.ext" -out "$P/$1.crt" 2>/dev/null || fail "openssl cert $1"
    }
    mkca ca
    mkca otherca
    mkcert server ca "subjectAltName=IP:127.0.0.1,DNS:localhost"
    mkcert client ca "extendedKeyUsage=clientAuth"
    EXTRA=""
    [ "$MODE" = mtls ] && EXTRA="--tls-client-ca $P/ca.crt"
    start_stub 0 --tls-cert "$P/server.crt" --tls-key "$P/server.key" $EXTRA
    export SW_AGENT_FORCE_TLS=true
    # The ring of a process configured with the working TLS settings names the collector with
    # their settings id (the reporter key, config.h); `swagent status` says which.
    if [ "$MODE" = tls ]; then
        GOOD="SW_AGENT_SSL_TRUSTED_CA_PATH=$P/ca.crt"
    else
        GOOD="SW_AGENT_SSL_TRUSTED_CA_PATH=$P/ca.crt SW_AGENT_SSL_KEY_PATH=$P/client.key SW_AGENT_SSL_CERT_CHAIN_PATH=$P/client.crt"
    fi
    KEY=$(env $GOOD SW_AGENT_COLLECTOR_BACKEND_SERVICES="127.0.0.1:$PORT" "$CLI" status |
        sed -n 's/^reporter key of this environment: \([^ ]*\) .*/\1/p')
    case $KEY in "127.0.0.1:$PORT+"????????) ;; *) fail "reporter key with TLS: '$KEY'" ;; esac
    "$PRODUCER" --dir "$RUN" --count 20 --linger 30 --collector "$KEY" --tag t \
        --service tls-svc >"$T/producer.out" &
    PIDS="$PIDS $!"
    wait_for "grep -q ready '$T/producer.out'" 10 || fail "producer did not get ready"
    # The bad setup serves that ring as a reporter started by its process after the file
    # changed would (--settings-id: the process's settings; logged).
    if [ "$MODE" = tls ]; then
        # A CA that did not sign the server certificate: nothing is delivered, nothing lost.
        SW_AGENT_SSL_TRUSTED_CA_PATH=$P/otherca.crt "$REPORTER" --foreground --runtime-dir "$RUN" \
            --collector "127.0.0.1:$PORT" --settings-id "${KEY##*+}" 2>>"$T/rep.err" &
        R=$!
    else
        # mTLS: no client certificate is rejected by the server.
        SW_AGENT_SSL_TRUSTED_CA_PATH=$P/ca.crt "$REPORTER" --foreground --runtime-dir "$RUN" \
            --collector "127.0.0.1:$PORT" --settings-id "${KEY##*+}" 2>>"$T/rep.err" &
        R=$!
    fi
    wait_for "grep -q 'are not those of the processes that started this reporter' '$RUN/swagent-reporter.log'" 10 ||
        fail "the reporter does not say its settings differ from the processes'"
    PIDS="$PIDS $R"
    wait_for "grep -q 'failed (status' '$RUN/swagent-reporter.log'" 15 || fail "no failed collect logged"
    [ "$(all_lines)" -eq 0 ] || fail "segments delivered over a bad TLS setup"
    kill "$R"
    wait_for "! kill -0 $R 2>/dev/null" 10 || fail "reporter did not stop"
    if [ "$MODE" = tls ]; then
        SW_AGENT_SSL_TRUSTED_CA_PATH=$P/ca.crt "$REPORTER" --foreground --runtime-dir "$RUN" \
            --collector "127.0.0.1:$PORT" 2>>"$T/rep.err" &
    else
        SW_AGENT_SSL_TRUSTED_CA_PATH=$P/ca.crt SW_AGENT_SSL_KEY_PATH=$P/client.key \
            SW_AGENT_SSL_CERT_CHAIN_PATH=$P/client.crt "$REPORTER" --foreground --runtime-dir "$RUN" \
            --collector "127.0.0.1:$PORT" 2>>"$T/rep.err" &
    fi
    PIDS="$PIDS $!"
    wait_for "[ \$(uniq_ids) -ge 20 ]" 20 || fail "only $(uniq_ids) of 20 segments over TLS"
    grep -q "tls on" "$RUN/swagent-reporter.log" || fail "channel not TLS"
    grep -q "serving TLS" "$T"/stub1.err || fail "stub not serving TLS"
    echo "# $MODE: 20 segments delivered after fixing the setup; the bad setup delivered none"
    ;;
slowlink)
    # A collector 200 ms away each way. A connection attempt needs >= 200 ms (TCP to the relay
    # is at once, the server's SETTINGS then cross the link); the reporter must give it that
    # time rather than fail the first calls and back off (a 100 ms connect timeout did).
    N=200
    export SW_AGENT_COLLECTOR_GRPC_UPSTREAM_TIMEOUT=20 # calls of a few round trips, loaded host
    start_stub 0
    rm -f "$T/relay.port"
    python3 "$(dirname "$0")/slow_relay.py" --target "$PORT" --port-file "$T/relay.port" \
        --delay-ms 200 --max-seconds 100 2>>"$T/relay.err" &
    PIDS="$PIDS $!"
    wait_for "[ -s '$T/relay.port' ]" 10 || fail "slow_relay.py did not start"
    RPORT=$(cat "$T/relay.port")
    start_producer "$RPORT" --count $N --linger 60 --tag slow --service slow-svc
    t0=$(date +%s%N)
    start_reporter "$RPORT"
    wait_for "[ \$(uniq_ids) -ge $N ]" 60 || fail "only $(uniq_ids) of $N segments arrived"
    t1=$(date +%s%N)
    wait_for "[ \"\$(status_val sent)\" -ge $N ] 2>/dev/null" 10 || fail "status: sent=$(status_val sent)"
    sleep 1.5 # a heartbeat or two more over the link
    u=$(uniq_ids) a=$(all_lines)
    [ "$u" -eq $N ] || fail "expected $N unique segment ids, got $u"
    [ "$a" -eq "$u" ] || fail "$((a - u)) duplicate segments"
    grep -q "slow_relay: connection 1 " "$T/relay.err" || fail "nothing went through the relay"
    fb=$(status_val failed_batches) fs=$(status_val failed_segments) sp=$(status_val spooled)
    echo "# slowlink: $u segments over a 400 ms round trip in $(((t1 - t0) / 1000000)) ms; failed_batches=$fb failed_segments=$fs spooled=$sp"
    [ "$fb" = 0 ] && [ "$fs" = 0 ] || fail "failed calls over a slow link: failed_batches=$fb failed_segments=$fs"
    [ "$sp" = 0 ] || fail "segments spooled over a slow link: spooled=$sp"
    ! grep -E "collect of .* failed|heartbeat for .* failed|spooled [0-9]+ segment" \
        "$RUN/swagent-reporter.log" || fail "failures in the reporter log"
    ;;
slowlink_bulk)
    # The reporter starts while the relay is down: its first calls fail (connection refused)
    # and it backs off, so its next calls are probes. Then the relay comes up as a 100,000
    # bytes/s link, and the batch (500 segments, each with a 2,000-byte tag: at least 1,000,000
    # bytes, ~10 s on the link, sent uncompressed) must go through: an empty probe under the
    # probe's 5 s deadline, then the batch under collector.grpc_upstream_timeout (40 s here).
    # When the batch itself was the probe, with the 5 s deadline, it failed on every retry.
    N=500 PAD=2000 RATE=100000
    export SW_AGENT_GRPC_GZIP=false SW_AGENT_COLLECTOR_GRPC_UPSTREAM_TIMEOUT=40
    start_stub 0
    RPORT=$(free_port)
    start_producer "$RPORT" --count $N --linger 60 --tag bulk --service bulk-svc \
        --ring-bytes 8388608 --pad $PAD
    start_reporter "$RPORT"
    wait_for "grep -q 'collect of $N segment(s) .* failed (status' '$RUN/swagent-reporter.log'" 15 ||
        fail "no failed call while the relay was down"
    rm -f "$T/relay.port"
    python3 "$(dirname "$0")/slow_relay.py" --target "$PORT" --port "$RPORT" \
        --port-file "$T/relay.port" --delay-ms 50 --rate $RATE --max-seconds 100 2>>"$T/relay.err" &
    PIDS="$PIDS $!"
    wait_for "[ -s '$T/relay.port' ]" 10 || fail "slow_relay.py did not start"
    t0=$(date +%s%N)
    wait_for "[ \"\$(status_val sent)\" -ge $N ] 2>/dev/null" 30 ||
        fail "only $(uniq_ids) of $N segments arrived over the narrow link"
    t1=$(date +%s%N)
    sleep 1
    u=$(uniq_ids) a=$(all_lines)
    [ "$u" -eq $N ] || fail "expected $N unique segment ids, got $u"
    [ "$a" -eq "$u" ] || fail "$((a - u)) duplicate segments"
    [ "$(jq -r '.spans[] | select(.spanId == 0) | .tags[] | select(.key == "pad") | .value | length' "$T"/seg*.json | sort -u)" = $PAD ] ||
        fail "the pad tag did not arrive whole"
    if [ "${SW_AGENT_GRPC_BATCH:-}" = false ]; then
        grep -q "segments streamed (collect)" "$RUN/swagent-reporter.log" || fail "not on the collect stream"
    fi
    ms=$(((t1 - t0) / 1000000))
    echo "# slowlink_bulk: $u segments (over $((N * PAD)) bytes) over a $RATE bytes/s link in $ms ms after the link came up; failed_batches=$(status_val failed_batches) spooled=$(status_val spooled)"
    # The test's own premise, not a performance figure: the relay did limit the link, so the
    # batch needed more than a probe's 5 s.
    [ "$ms" -ge $((N * PAD / RATE * 1000 - 500)) ] || fail "the relay did not limit the rate: $ms ms for $((N * PAD)) bytes"
    ;;
sigterm)
    N=50
    # The default deadline (30 s), so a first call waits the full 5 s for its connection.
    export SW_AGENT_COLLECTOR_GRPC_UPSTREAM_TIMEOUT=30
    CPORT=$(free_port)
    start_producer "$CPORT" --count $N --linger 60 --tag st --service stop-svc
    # stop_while_connecting SIGNAL WHAT: a reporter whose first call waits (up to 5 s) for a
    # connection to 127.0.0.1:$CPORT that never completes gets SIGNAL 1.5 s after its start.
    stop_while_connecting() {
        start_reporter "$CPORT"
        wait_for "grep -qs 'started: pid $R,' '$RUN/swagent-reporter.log'" 10 || fail "reporter did not start"
        sleep 1.5
        # The premise: its first call is still waiting (no call has ended, so none failed).
        grep -q "swagent\[$R\]: .*failed (status" "$RUN/swagent-reporter.log" &&
            fail "a call failed before SIG$1 ($2)"
        s=$(date +%s%N)
        kill -"$1" "$R"
        wait_for "! kill -0 $R 2>/dev/null" 10 || fail "reporter still running 10 s after SIG$1 ($2)"
        e=$(date +%s%N)
        wait "$R"
        rc=$?
        ms=$(((e - s) / 1000000))
        echo "# sigterm: SIG$1 while connecting to $2: the reporter exited ($rc) after $ms ms"
        [ "$rc" -eq 0 ] || fail "reporter exited with $rc after SIG$1"
        [ "$ms" -lt 2000 ] || fail "the reporter took $ms ms to stop after SIG$1 while connecting to $2"
        [ "$(all_lines)" -eq 0 ] || fail "segments delivered to $2"
    }
    bad_listener silent "$CPORT"
    stop_while_connecting TERM "a listener that never answers"
    kill "$BH"
    wait "$BH" 2>/dev/null
    bad_listener full "$CPORT"
    stop_while_connecting INT "a listener that drops SYNs"
    kill "$BH"
    wait "$BH" 2>/dev/null
    # Nothing was lost: a new reporter delivers the batch the stopped ones held.
    start_stub "$CPORT"
    start_reporter "$CPORT"
    expect_once $N 20
    echo "# sigterm: $u segments delivered once by the next reporter"
    ;;
partial)
    # The producer commits all 1,500 records before the reporter starts, so they make one batch
    # (up to 2,000 segments), which is split at 2 MiB. The stub answers the first call OK and
    # fails the second; once the backoff is over the batch goes again. Before, the whole batch
    # was sent again, and the first call's ~900 segments arrived twice.
    N=1500 PAD=2000
    start_stub 0 --fail-calls 2
    CPORT=$PORT
    start_producer "$CPORT" --count $N --linger 60 --tag part --service part-svc \
        --ring-bytes 8388608 --pad $PAD
    start_reporter "$CPORT"
    expect_once $N 30 "the delivered part of the batch was sent again"
    # The premise: the batch was split and its second call failed.
    grep -q "segment message 2 failed on purpose" "$T/stub1.err" || fail "the stub failed no second call"
    grep -q "collect of $N segment(s) .* failed (status" "$RUN/swagent-reporter.log" ||
        fail "no failed batch of $N segments"
    f=$(status_val failed_segments)
    [ "${f:-0}" -gt 0 ] && [ "$f" -lt $N ] || fail "failed_segments=$f: expected only the failed call's segments"
    echo "# partial: $u segments once; the failed call carried $f of the batch of $N, sent=$(status_val sent)"
    ;;
partial_replay)
    # The producer commits 500 records and exits; the reporter finds the collector down and
    # spools the dead producer's ring (one file: 500 segments is a spool file's size). Then the
    # stub comes up and fails the replay's second call (its numbering counts only calls that
    # reached it).
    N=500 PAD=5000
    CPORT=$(free_port)
    start_producer "$CPORT" --count $N --tag prep --service prep-svc --ring-bytes 8388608 \
        --pad $PAD
    start_reporter "$CPORT"
    wait_for "[ \"\$(status_val spooled)\" -ge $N ] 2>/dev/null" 20 || fail "the ring was not spooled (spooled=$(status_val spooled))"
    start_stub "$CPORT" --fail-calls 2
    expect_once $N 30 "the delivered part of the spool file was sent again"
    grep -q "segment message 2 failed on purpose" "$T/stub1.err" || fail "the stub failed no second call"
    k=$(sed -n 's/.*replay of spool file .* failed .*; kept, its first \([0-9]*\) delivered.*/\1/p' "$RUN/swagent-reporter.log" | head -1)
    [ "${k:-0}" -gt 0 ] || fail "no replay failed after a part of its file was delivered"
    [ "$(status_val replayed)" -eq $N ] || fail "replayed=$(status_val replayed), expected $N"
    wait_for "! ls '$RUN'/spool-*/seg-* >/dev/null 2>&1" 10 || fail "spool file left after replay"
    echo "# partial_replay: $u segments once; the first replay delivered $k of the file's $N before its second call failed"
    ;;
toolarge | toolarge_spool | toolarge_java)
    # Before, RESOURCE_EXHAUSTED was an ordinary failure: the same batch again after a backoff,
    # for ever, and nothing behind it was delivered.
    N=300 BIG=5
    export SW_AGENT_GRPC_GZIP=false # the limit then applies to the bytes as sent
    WORDING=""
    [ "$MODE" = toolarge_java ] && WORDING=--java-wording
    if [ "$MODE" != toolarge_spool ]; then
        start_stub 0 --max-message 8000 $WORDING
        CPORT=$PORT
        start_producer "$CPORT" --count $N --linger 60 --tag small --service small-svc
        start_producer "$CPORT" --count $BIG --linger 60 --tag big --service big-svc --pad 12000
        start_reporter "$CPORT"
    else
        CPORT=$(free_port)
        start_producer "$CPORT" --count $N --tag small --service small-svc
        start_producer "$CPORT" --count $BIG --tag big --service big-svc --pad 12000
        start_reporter "$CPORT"
        wait_for "[ \"\$(status_val spooled)\" -ge $((N + BIG)) ] 2>/dev/null" 20 ||
            fail "the rings were not spooled (spooled=$(status_val spooled))"
        start_stub "$CPORT" --max-message 8000
    fi
    expect_once $N 20
    [ "$(jq -r .service "$T"/seg*.json | sort -u)" = small-svc ] || fail "a big segment arrived"
    wait_for "[ \"\$(status_val dropped)\" -ge $BIG ] 2>/dev/null" 10 || fail "dropped=$(status_val dropped), expected $BIG"
    [ "$(status_val dropped)" -eq $BIG ] || fail "dropped=$(status_val dropped), expected $BIG"
    # Logged at most once per 10 s (with the count since the last such line): here once.
    r=$(grep -c "refused a .*segment of [0-9]* bytes (service big-svc) as too large" "$RUN/swagent-reporter.log")
    [ "$r" -eq 1 ] || fail "$r lines for the refused segments, expected 1 (at most one per 10 s)"
    if [ "${SW_AGENT_GRPC_BATCH:-}" != false ]; then
        grep -q "messages of at most [0-9]* bytes from now on" "$RUN/swagent-reporter.log" ||
            fail "the refused message was not sent again smaller"
        # The refusal named the limit (in gRPC core's words or grpc-java's): straight to it.
        grep -q "messages of at most 8000 bytes from now on" "$RUN/swagent-reporter.log" ||
            fail "the messages did not go at the 8,000 bytes the refusal named"
    fi
    fb=$(status_val failed_batches)
    refusals=$(grep -c "RESOURCE_EXHAUSTED\|ERROR: .*exceeds maximum size\|larger than max" "$T/stub1.err")
    if [ "${SW_AGENT_GRPC_BATCH:-}" = false ]; then
        # On the stream, the sends after the refused message fail; the call still ends with
        # the refusal, not CANCELLED (it did in 1 run in 15 to 1 in 3: an ordinary failure,
        # the stream sent again whole, and what the collector had taken before the refused
        # message arrived twice). Once the refusal was read, its limit keeps every big
        # segment off the stream: one refused stream in all, no failed batch.
        [ "$fb" = 0 ] || fail "failed_batches=$fb: the refused stream did not end with the refusal"
        [ "$refusals" -eq 1 ] || fail "$refusals refused streams: big segments were sent again after the limit was known"
        echo "# $MODE on the stream: $refusals refused stream(s), $fb failed batch(es)"
    elif [ "$MODE" != toolarge_spool ]; then
        [ "$fb" = 0 ] || fail "failed_batches=$fb: a refusal as too large is not an outage"
    else
        wait_for "! ls '$RUN'/spool-*/seg-* >/dev/null 2>&1" 10 || fail "spool file left after replay"
    fi
    echo "# $MODE: $u segments once, $BIG too large for the collector dropped; $(grep -c 'from now on' "$RUN/swagent-reporter.log") message size step(s)"
    ;;
toolarge_rotate)
    N=300
    start_stub 0 --max-message 8000
    PA=$PORT APID=$STUB_PID
    start_stub 0
    PB=$PORT
    ADDRS="$PA,127.0.0.1:$PB"
    start_producer "$ADDRS" --count $N --linger 60 --tag first --service rot-svc
    start_reporter "$ADDRS"
    arrived $N 20
    [ "$(all_lines)" -eq "$(wc -l <"$T/seg1.json")" ] || fail "segments reached the second address while the first was up"
    grep -q "messages of at most [0-9]* bytes from now on" "$RUN/swagent-reporter.log" ||
        fail "the first address did not make the reporter send smaller messages"
    kill "$APID"
    wait "$APID" 2>/dev/null
    start_producer "$ADDRS" --count $N --linger 60 --tag second --service rot-svc
    expect_once $((2 * N)) 30
    grep -q "switching to collector address 127.0.0.1:$PB" "$RUN/swagent-reporter.log" ||
        fail "no move to the second address logged"
    # gzip is on: collector-stub logs each message's inflated size.
    big=$(sed -n 's/.*collectInSync: message [0-9]* arrived gzip-compressed ([0-9]* bytes, \([0-9]*\) inflated).*/\1/p' "$T/stub2.err" | sort -n | tail -1)
    echo "# toolarge_rotate: largest message at the second address: ${big:-none} bytes"
    [ "${big:-0}" -gt 8000 ] || fail "the second address got messages of at most ${big:-0} bytes: the first one's limit was kept"
    ;;
bad_records)
    N=20 BAD=5
    CPORT=$(free_port)
    start_producer "$CPORT" --count $N --bad $BAD --linger 60 --tag bad --service bad-svc
    start_reporter "$CPORT"
    wait_for "[ \$(grep -c 'collect of $N segment(s) .* failed (status' '$RUN/swagent-reporter.log') -ge 3 ]" 15 ||
        fail "fewer than 3 failed attempts while the collector was down"
    start_stub "$CPORT"
    expect_once $N 20
    wait_for "[ \"\$(status_val sent)\" -ge $N ] 2>/dev/null" 10 || fail "status: sent=$(status_val sent)"
    [ "$(status_val dropped)" -eq $BAD ] || fail "dropped=$(status_val dropped), expected $BAD (one per record that does not parse)"
    echo "# bad_records: $u segments once, $BAD records that do not parse dropped once each after $(grep -c 'failed (status' "$RUN/swagent-reporter.log") failed attempts"
    ;;
exit_reports)
    # 40 short processes that exited before the reporter ran (a CGI server's or a script's
    # runs): a dead ring of one segment each, each its own instance of one service. The reporter
    # gives exited processes their last report (properties and a keepAlive: the OAP lists a
    # client-only service from it) at most 10 a second: a few, not two calls for each of the 40.
    N=40
    start_stub 0
    CPORT=$PORT
    for i in $(seq $N); do
        "$PRODUCER" --dir "$RUN" --collector "127.0.0.1:$CPORT" --count 1 --linger 0 --no-cleanup \
            --service exit-svc --tag x$i >/dev/null || fail "producer $i failed"
    done
    start_reporter "$CPORT"
    expect_once $N 20
    sleep 3
    np=$(jq -s '[.[] | select(.method == "reportInstanceProperties" and .service == "exit-svc")] | length' "$T/mgmt1.json")
    nk=$(jq -s '[.[] | select(.method == "keepAlive" and .service == "exit-svc")] | length' "$T/mgmt1.json")
    echo "# exit_reports: $np properties and $nk keepAlive calls for $N exited processes"
    [ "$np" -ge 1 ] && [ "$nk" -ge 1 ] || fail "no last report of the exited processes ($np properties, $nk keepAlive): their service would not be listed"
    [ "$np" -le 20 ] || fail "$np properties reports for $N exited processes within seconds: not limited to 10 a second"
    ;;
probe_ok)
    # Heartbeats every second (as in the other modes): an answered heartbeat must not end the
    # backoff that the failed batches armed.
    N=50
    start_stub 0 --fail-calls 1-
    CPORT=$PORT
    start_producer "$CPORT" --count $N --linger 60 --tag pok --service probe-svc
    start_reporter "$CPORT"
    wait_for "grep -q 'collect of $N segment(s) .* failed (status' '$RUN/swagent-reporter.log'" 10 ||
        fail "the first batch did not fail"
    sleep 8
    nf=$(grep -c "collect of $N segment(s) .* failed (status" "$RUN/swagent-reporter.log")
    echo "# probe_ok: $nf failed batches in the first ~8 s (each after an answered probe but the first)"
    [ "$nf" -ge 3 ] || fail "only $nf failed batches: were the probes answered?"
    [ "$nf" -le 10 ] || fail "$nf failed batches in ~8 s: the backoff restarted at every answered probe or heartbeat"
    nh=$(grep -c '"method": *"\(keepAlive\|reportInstanceProperties\)"' "$T/mgmt1.json")
    echo "# probe_ok: $nh heartbeats answered meanwhile"
    [ "$nh" -ge 2 ] || fail "only $nh heartbeats reached the collector while batches failed"
    [ "$(all_lines)" -eq 0 ] || fail "segments written by a stub that fails every batch"
    kill "$STUB_PID"
    wait "$STUB_PID" 2>/dev/null
    start_stub "$CPORT"
    expect_once $N 20
    echo "# probe_ok: $u segments delivered once when the collector accepted them"
    ;;
*)
    echo "unknown mode $MODE"
    exit 2
    ;;
esac
echo "ok - reliability $MODE"
exit 0
