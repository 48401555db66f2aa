#!/usr/bin/env bash
# oap_restart.sh - a real SkyWalking OAP 10.1.0 stopped and restarted in the middle of a test:
# the agent side loses nothing.
#   curl (restart-curl) -> python3 -m http.server (restart-python), both under libswagent.so.
# 1. OAP up: request 1; the OAP shows its trace (2 segments, python's entry a ref to curl's
#    exit).
# 2. OAP stopped (scripts/oap.sh stop; H2 in memory: its data goes with it): requests 2 and 3
#    are served as usual; the reporter cannot send and keeps their segments (the exited curls'
#    rings go to its spool at once).
# 3. OAP started again on the same ports: the reporter reconnects and replays; the new OAP
#    shows exactly the two traces of requests 2 and 3, each with its parent link, and the
#    reporter counts the spooled segments as replayed, none dropped.
# A failure says which side: [agent side] if the reporter did not keep or send the segments,
# [OAP side] if it sent them and the OAP does not show them.
E2E_NAME=oap_restart
. "$E2E_DIR/lib.sh"
. "$OAP_DIR/lib_oap.sh"
e2e_init
oap_start
mkdir -p "$T/www"
echo hello >"$T/www/hello.txt"
start_server py traced restart-python python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/www"
PY=$PORT

request() { # N: one traced curl; prints nothing, fails the test on a bad answer
    local body
    body=$(traced restart-curl curl -sS -H "X-Request: $1" "http://127.0.0.1:$PY/hello.txt") ||
        fail "request $1: curl failed"
    [ "$body" = hello ] || fail "request $1: body '$body'"
}

# segments: the query of the segments of the test's time window.
segments() {
    echo "{ queryBasicTraces(condition: {queryDuration: $(oap_duration SECOND), traceState: ALL,
        queryOrder: BY_START_TIME, paging: {pageNum: 1, pageSize: 50}}) { traces { segmentId traceIds } } }"
}

# check_traces N: the OAP shows N traces of 2 segments, python's entry a ref to curl's exit.
check_traces() {
    local n=$1 tid
    gql_until "$(segments)" ".queryBasicTraces.traces | length >= $((2 * n))" 90 \
        "$((2 * n)) segments (agent: sent=$(reporter_count sent) spooled=$(reporter_count spooled) replayed=$(reporter_count replayed))"
    expect ".queryBasicTraces.traces | length == $((2 * n))
        and ([.[].traceIds[0]] | group_by(.) | map(length) | all(. == 2) and length == $n)" \
        "$n traces of 2 segments each"
    for tid in $(jq -r '[.queryBasicTraces.traces[].traceIds[0]] | unique | .[]' <<<"$GQL"); do
        GQL=$(gql "{ queryTrace(traceId: \"$tid\") { spans { segmentId spanId parentSpanId serviceCode type
            refs { parentSegmentId parentSpanId type } } } }")
        expect '.queryTrace.spans as $s | ($s | length) == 2
            | [$s[] | select(.serviceCode == "restart-curl" and .type == "Exit")] as $c
            | [$s[] | select(.serviceCode == "restart-python" and .type == "Entry")] as $p
            | ($c | length) == 1 and ($p | length) == 1
            and $p[0].refs == [{parentSegmentId: $c[0].segmentId, parentSpanId: $c[0].spanId,
                type: "CROSS_PROCESS"}]' "trace $tid: python's entry -> curl's exit"
    done
}

request 1
wait_for "[ \$(reporter_sent) -ge 2 ]" 30 || oap_fail agent "the reporter sent $(reporter_sent) of 2 segments"
check_traces 1
echo "phase 1: the OAP shows request 1's trace"

oap_down
echo "OAP stopped"
request 2
request 3
# The two exited curls' segments are in the spool once a call has failed (python's stay in its
# ring, which is not lost either).
wait_for "[ \$(reporter_count spooled) -ge 2 ]" 40 ||
    oap_fail agent "with the OAP down, the reporter spooled $(reporter_count spooled) segments, expected >= 2 (the exited curls')"
[ "$(reporter_sent)" -eq 2 ] || oap_fail agent "sent $(reporter_sent) segments with the OAP down"
echo "phase 2: OAP down, the reporter spooled $(reporter_count spooled) segments"

oap_up
# The agent's side first: everything it kept went out once the OAP was back.
wait_for "[ \$(reporter_count replayed) -ge 2 ]" 60 ||
    oap_fail agent "the reporter replayed $(reporter_count replayed) of its $(reporter_count spooled) spooled segments"
[ "$(reporter_count dropped)" -eq 0 ] || oap_fail agent "the reporter dropped $(reporter_count dropped) segments"
wait_for "[ \$((\$(reporter_sent) + \$(reporter_count replayed))) -ge 6 ]" 30 ||
    oap_fail agent "the reporter counts $(reporter_sent) segments sent and $(reporter_count replayed) replayed, expected 6 in all"
check_traces 2
echo "phase 3: OAP restarted, it shows requests 2 and 3 (replayed $(reporter_count replayed))"
oap_log_check
echo "ok oap_restart"
