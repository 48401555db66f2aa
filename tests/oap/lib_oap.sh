# lib_oap.sh - helpers of the tests against a real SkyWalking OAP (sourced after
# tests/e2e/lib.sh; bash). The OAP is started by scripts/oap.sh with its state in $T/oap, on
# kernel-chosen loopback ports, and stopped in the EXIT trap; its jars come from the shared
# download cache (scripts/oap.sh fetch), fetched here when missing.
#
# Environment (tests/oap.cmake): OAP_SH (scripts/oap.sh), and those of tests/e2e/lib.sh.

OAP_STARTED=""

oap_cleanup() {
    local d
    if [ -n "$OAP_STARTED" ]; then
        for d in "$T"/*/oap.pid; do
            [ -f "$d" ] && "$OAP_SH" stop --dir "${d%/oap.pid}" >/dev/null 2>&1
        done
    fi
    e2e_cleanup
}

# oap_fail SIDE MESSAGE: fails naming the side that failed (agent, OAP, or test), with the OAP
# log's tail and the reporter's counters.
oap_fail() {
    local side=$1
    shift
    {
        [ -f "$T/oap/logs/skywalking-oap-server.log" ] && {
            echo "--- OAP log (tail)"
            tail -n 40 "$T/oap/logs/skywalking-oap-server.log"
        }
        for f in "$T"/run/reporter-*.status; do
            [ -f "$f" ] && { echo "--- $f"; cat "$f"; }
        done
    } >&2
    fail "[$side side] $*"
}

# oap_fetch: the OAP's jars in the cache. Exit 77 (SKIP) when Maven Central cannot be reached
# or does not have them; a download that does not match the pinned checksums is a failure.
oap_fetch() {
    local rc=0
    "$OAP_SH" fetch >"$T/oap-fetch.out" 2>&1 || rc=$?
    if [ $rc -eq 3 ]; then
        cat "$T/oap-fetch.out" >&2
        echo "SKIP: the SkyWalking OAP 10.1.0 jars cannot be had from Maven Central (scripts/oap.sh fetch exit 3)"
        exit 77
    fi
    [ $rc -eq 0 ] || fail "scripts/oap.sh fetch failed (exit $rc): $(tail -n 20 "$T/oap-fetch.out")"
}

# oap_start: an OAP in $T/oap on free ports; sets OAP_GRPC, OAP_HTTP, OAP_LOG, OAP_PID and
# OAP_LOG_FROM (the log's line count once ready: later WARN/ERROR lines are the test's).
oap_start() {
    oap_prepare
    oap_up
}

# oap_prepare: the jars, the ports and the agents' collector address, no OAP started yet (a
# test of an OAP not reachable at first starts it later with oap_up).
oap_prepare() {
    oap_fetch
    OAP_GRPC=$(free_port)
    OAP_HTTP=$(free_port)
    OAP_LOG=$T/oap/logs/skywalking-oap-server.log
    trap oap_cleanup EXIT
    OAP_STARTED=1
    export SW_AGENT_COLLECTOR_BACKEND_SERVICES=127.0.0.1:$OAP_GRPC
}

# oap_up: starts the OAP of $T/oap on OAP_GRPC / OAP_HTTP (again, after oap_down) and waits.
oap_up() {
    oap_launch
    oap_ready
}

# oap_launch: starts the OAP in the background, not waiting for it (it takes seconds to come up).
# OAP_SET (an array of KEY=VALUE) holds settings for scripts/oap.sh --set.
OAP_SET=()
oap_launch() {
    local sets=() kv
    for kv in "${OAP_SET[@]}"; do sets+=(--set "$kv"); done
    TZ=UTC "$OAP_SH" start --dir "$T/oap" --grpc-port "$OAP_GRPC" --http-port "$OAP_HTTP" \
        "${sets[@]}" 2>"$T/oap-start.err" ||
        oap_fail OAP "scripts/oap.sh start failed: $(cat "$T/oap-start.err")"
    OAP_T0=$SECONDS
}

# oap_ready: waits until the launched OAP answers.
oap_ready() {
    "$OAP_SH" wait --dir "$T/oap" --timeout "${OAP_START_TIMEOUT:-300}" 2>"$T/oap-wait.err" ||
        oap_fail OAP "the OAP did not come up: $(cat "$T/oap-wait.err")"
    OAP_PID=$(cat "$T/oap/oap.pid")
    OAP_LOG_FROM=$(wc -l <"$OAP_LOG")
    echo "OAP ready in $((SECONDS - OAP_T0)) s (pid $OAP_PID, gRPC $OAP_GRPC, HTTP $OAP_HTTP)"
}

# oap_down: stops the OAP (its in-memory data goes with it); first checks its log.
oap_down() {
    oap_log_check
    "$OAP_SH" stop --dir "$T/oap" 2>/dev/null || oap_fail test "scripts/oap.sh stop failed"
    ! kill -0 "$OAP_PID" 2>/dev/null || oap_fail test "the OAP (pid $OAP_PID) did not stop"
}

# gql QUERY [JQ-ARGS...]: the OAP's answer to a GraphQL query (the data member, as JSON); a
# GraphQL error fails the test.
gql() {
    local q=$1 out
    out=$(curl -sS -m 10 -X POST -H 'Content-Type: application/json' \
        --data "$(jq -cn --arg q "$q" '{query: $q}')" "http://127.0.0.1:$OAP_HTTP/graphql") ||
        oap_fail OAP "GraphQL request failed: $q"
    if ! jq -e '(.errors // []) | length == 0' >/dev/null <<<"$out"; then
        oap_fail test "GraphQL error for $q: $out"
    fi
    jq -c '.data' <<<"$out"
}

# Durations of the OAP's queries, in UTC (the OAP runs with TZ=UTC): from the test's start
# (less a minute) to a minute from now.
oap_duration() { # STEP (MINUTE or SECOND)
    local fmt='%Y-%m-%d %H%M'
    [ "$1" = SECOND ] && fmt='%Y-%m-%d %H%M%S'
    printf '{start: "%s", end: "%s", step: %s}' \
        "$(date -u -d "@$((T_START / 1000 - 60))" +"$fmt")" \
        "$(date -u -d "@$(($(date +%s) + 60))" +"$fmt")" "$1"
}

# gql_until 'QUERY' 'JQ CONDITION over the data' SECONDS WHAT: polls until the condition holds;
# leaves the last answer in GQL; fails on the OAP side with WHAT otherwise.
gql_until() {
    local q=$1 cond=$2 secs=$3 what=$4 deadline=$((SECONDS + $3))
    while :; do
        GQL=$(gql "$q")
        jq -e "$cond" >/dev/null 2>&1 <<<"$GQL" && return 0
        if [ $SECONDS -ge $deadline ]; then
            oap_fail OAP "$what: not within $secs s (last answer: $GQL)"
        fi
        sleep 1
    done
}

# expect 'JQ CONDITION' 'what it means' [JSON]: fails (test side: what the OAP shows is wrong)
# unless the condition holds on JSON (default $GQL).
expect() {
    local json=${3:-$GQL}
    jq -e "$1" >/dev/null 2>"$T/jq.err" <<<"$json" ||
        oap_fail OAP "$2 [jq: $1] $(cat "$T/jq.err") in: $(head -c 3000 <<<"$json")"
}

# reporter_count [KEY]: the sum of KEY (default sent; spooled, replayed ...) over the status
# files of this test's reporters.
reporter_count() {
    local key=${1:-sent} n=0 f s
    for f in "$T"/run/reporter-*.status; do
        [ -f "$f" ] || continue
        s=$(sed -n "s/^\(.* \)\{0,1\}$key=\([0-9]*\)\( .*\)\{0,1\}\$/\2/p" "$f" | head -1)
        n=$((n + ${s:-0}))
    done
    echo $n
}
reporter_sent() { reporter_count sent; }

# oap_log_check: the OAP logged no WARN or ERROR since it was ready (rejected or failed
# segments, analysis errors).
oap_log_check() {
    local bad
    bad=$(tail -n +"$((OAP_LOG_FROM + 1))" "$OAP_LOG" | grep -E ' (WARN|ERROR) ' | head -n 20 || true)
    [ -z "$bad" ] || oap_fail OAP "the OAP logged warnings/errors while taking our data:
$bad"
}
