#!/usr/bin/env bash
# oap_restart.sh - a real SkyWalking OAP 10.1.0 that is not there at first, slow to start, and
# stopped and restarted in the middle of a test: the agent side loses nothing.
#   curl (restart-curl) -> python3 -m http.server (restart-python), both under libswagent.so.
# 0. No OAP yet (nothing listens on the collector address): request 1 is served as usual; the
#    reporter cannot connect and spools the exited curl's segment. The OAP is started and,
#    while it starts (seconds of JVM start before its gRPC port answers), request 2 is served.
#    Once it is ready the OAP shows both traces (2 segments each, python's entry a ref to
#    curl's exit), the spooled segment counted as replayed, none dropped, and lists both
#    services (curl's from the heartbeat the reporter sends for its exited processes once
#    their spooled segments are replayed).
# 1. OAP up: request 3; the OAP shows its trace too (3 traces).
# 2. OAP stopped (scripts/oap.sh stop; H2 in memory: its data goes with it): requests 4 and 5
#    are served as usual; the reporter cannot send and keeps their segments (the exited curls'
#    rings go to its spool at once).
# 3. OAP started again on the same ports: the reporter reconnects and replays; the new OAP
#    shows exactly the two traces of requests 4 and 5, each with its parent link, and the
#    reporter counts the spooled segments as replayed, none dropped.
# A failure says which side: [agent side] if the reporter did not keep or send the segments,
# [OAP side] if it sent them and the OAP does not show them.
E2E_NAME=oap_restart
. "$E2E_DIR/lib.sh"
. "$OAP_DIR/lib_oap.sh"
e2e_init
oap_prepare
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
wait_for "[ \$(reporter_count spooled) -ge 1 ]" 40 ||
    oap_fail agent "with no OAP listening, the reporter spooled $(reporter_count spooled) segments, expected >= 1 (the exited curl's)"
[ "$(reporter_sent)" -eq 0 ] || oap_fail agent "sent $(reporter_sent) segments with no OAP"
echo "phase 0: no OAP, request 1 served, the reporter spooled $(reporter_count spooled) segments"
oap_launch
request 2
# Served while the OAP was still starting (its GraphQL did not answer yet), unless it came up
# faster than a curl: then the phase tests a plain outage, which is said.
if curl -s -m 2 -o /dev/null "http://127.0.0.1:$OAP_HTTP/graphql"; then
    echo "phase 0: the OAP answered before request 2 (not a slow start this time)"
else
    echo "phase 0: request 2 served while the OAP was starting"
fi
oap_ready
wait_for "[ \$(reporter_count replayed) -ge 1 ]" 60 ||
    oap_fail agent "the reporter replayed $(reporter_count replayed) of its $(reporter_count spooled) spooled segments"
wait_for "[ \$((\$(reporter_sent) + \$(reporter_count replayed))) -ge 4 ]" 60 ||
    oap_fail agent "the reporter counts $(reporter_sent) segments sent and $(reporter_count replayed) replayed, expected 4 in all"
[ "$(reporter_count dropped)" -eq 0 ] || oap_fail agent "the reporter dropped $(reporter_count dropped) segments"
check_traces 2
# The curls exited while no OAP answered, so their heartbeats (the keepAlive that registers the
# client-only service) come from the reporter once their replayed segments are delivered.
gql_until '{ listServices { name } }' '[.listServices[].name] | sort == ["restart-curl", "restart-python"]' 60 \
    "restart-curl (whose curls exited during the outage) and restart-python listed"
echo "phase 0: the OAP, once up, shows requests 1 and 2 (replayed $(reporter_count replayed)) and both services"

request 3
wait_for "[ \$((\$(reporter_sent) + \$(reporter_count replayed))) -ge 6 ]" 30 ||
    oap_fail agent "the reporter counts $(reporter_sent) sent + $(reporter_count replayed) replayed of 6 segments"
check_traces 3
echo "phase 1: the OAP shows request 3's trace"
SENT1=$(reporter_sent) SPOOLED1=$(reporter_count spooled) REPLAYED1=$(reporter_count replayed)

oap_down
echo "OAP stopped"
request 4
request 5
# The two exited curls' segments are in the spool once a call has failed (python's stay in its
# ring, which is not lost either).
wait_for "[ \$((\$(reporter_count spooled) - SPOOLED1)) -ge 2 ]" 40 ||
    oap_fail agent "with the OAP down, the reporter spooled $(($(reporter_count spooled) - SPOOLED1)) segments, expected >= 2 (the exited curls')"
[ "$(reporter_sent)" -eq "$SENT1" ] || oap_fail agent "sent $(($(reporter_sent) - SENT1)) segments with the OAP down"
echo "phase 2: OAP down, the reporter spooled $(($(reporter_count spooled) - SPOOLED1)) segments"

oap_up
# The agent's side first: everything it kept went out once the OAP was back.
wait_for "[ \$((\$(reporter_count replayed) - REPLAYED1)) -ge 2 ]" 60 ||
    oap_fail agent "the reporter replayed $(($(reporter_count replayed) - REPLAYED1)) of its $(($(reporter_count spooled) - SPOOLED1)) spooled segments"
[ "$(reporter_count dropped)" -eq 0 ] || oap_fail agent "the reporter dropped $(reporter_count dropped) segments"
wait_for "[ \$((\$(reporter_sent) + \$(reporter_count replayed))) -ge 10 ]" 30 ||
    oap_fail agent "the reporter counts $(reporter_sent) segments sent and $(reporter_count replayed) replayed, expected 10 in all"
check_traces 2
echo "phase 3: OAP restarted, it shows requests 4 and 5 (replayed $(reporter_count replayed))"
oap_log_check
echo "ok oap_restart"
