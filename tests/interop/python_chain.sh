# python_chain.sh - the scenario of the Python agent interop (sourced, bash, after
# tests/e2e/lib.sh and e2e_init): SkyWalking's Python agent as a second peer, in the middle of
#   curl (swagent) -> python http.server traced by the Python agent (apache-skywalking, NOT under
#   LD_PRELOAD) -> python3 -m http.server (swagent).
# The scenario (processes and requests) is apart from the checks: the checks are functions of
# the collected segments, so the same chain can be reported to collector-stub (interop_python)
# or to a real OAP (whose test asserts the same joins through GraphQL).
#
# With a real OAP instead of collector-stub: e2e_init, export SW_AGENT_COLLECTOR_BACKEND_SERVICES
# (the OAP's gRPC address) instead of start_stub, python_chain_start, python_chain_requests; then
# the same joins through GraphQL: per path, queryBasicTraces finds one trace whose queryTrace
# spans come from the three services; the Python agent's entry span (endpoint "/data.txt") has a
# ref whose parentSegmentId/parentSpanId are curl's exit span's segmentId/spanId, and python's
# entry span (endpoint "GET:/data.txt") one naming the Python agent's exit span; every span of
# the /missing.txt trace isError.
#
# Environment: PY_VENV (the venv of the fixture interop_pip_install), INTEROP_DIR,
# SW_AGENT_COLLECTOR_BACKEND_SERVICES (start_stub sets it; any collector's gRPC address does).
PYC_CURL=e2e-curl PYC_AGENT=e2e-pyagent PYC_AGENT_INSTANCE=e2e-pyagent-1 PYC_BACKEND=e2e-python

# python_chain_start: the backend (swagent) and the Python agent's server in the middle; sets
# PYC_BACK and PYC_MID (their ports) and PYC_MID_PID.
python_chain_start() {
    [ -x "$PY_VENV/bin/python" ] && "$PY_VENV/bin/python" -c 'import skywalking' 2>/dev/null ||
        fail "apache-skywalking not installed in $PY_VENV (fixture interop_pip_install)"
    mkdir -p "$T/www"
    echo "from python" >"$T/www/data.txt"
    start_server py traced "$PYC_BACKEND" python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/www"
    PYC_BACK=$PORT
    # The Python agent's extras off (meter, log reporter, profiling: services collector-stub
    # answers UNIMPLEMENTED), its heartbeat every 2 s so that the management calls come soon.
    start_server pyagent env -u LD_PRELOAD SW_AGENT_NAME="$PYC_AGENT" \
        SW_AGENT_INSTANCE_NAME="$PYC_AGENT_INSTANCE" \
        SW_AGENT_COLLECTOR_BACKEND_SERVICES="$SW_AGENT_COLLECTOR_BACKEND_SERVICES" \
        SW_AGENT_PROTOCOL=grpc SW_AGENT_METER_REPORTER_ACTIVE=False \
        SW_AGENT_PVM_METER_REPORTER_ACTIVE=False SW_AGENT_LOG_REPORTER_ACTIVE=False \
        SW_AGENT_PROFILE_ACTIVE=False SW_AGENT_COLLECTOR_HEARTBEAT_PERIOD=2 \
        SW_AGENT_LOGGING_LEVEL=INFO BACKEND_PORT="$PYC_BACK" \
        "$PY_VENV/bin/python" -u "$INTEROP_DIR/python_server.py"
    PYC_MID=$PORT PYC_MID_PID=$LAST_PID
    tr '\0' '\n' <"/proc/$PYC_MID_PID/environ" | grep -q '^LD_PRELOAD=' && fail "the Python agent's server runs under LD_PRELOAD"
    grep -q libswagent "/proc/$PYC_MID_PID/maps" && fail "libswagent.so is loaded in the Python agent's server"
    return 0
}

# python_chain_requests: two chains, each its own trace: GET /data.txt (200, the backend's body
# relayed) and GET /missing.txt (404 at the backend, relayed: an error on every hop).
python_chain_requests() {
    local body code
    body=$(traced "$PYC_CURL" curl -sS "http://127.0.0.1:$PYC_MID/data.txt") || fail "curl failed"
    [ "$body" = "from python" ] || fail "body: $body"
    code=$(traced "$PYC_CURL" curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PYC_MID/missing.txt") || true
    [ "$code" = 404 ] || fail "the 404 request answered $code"
}

# python_chain_check_segments: the checks over collector-stub's segments ($T/seg.json); 6
# segments must have arrived (wait_segments 6).
python_chain_check_segments() {
    local defs path st err
    # chain(path): the segments of the chain of that request, one per service, found by
    # operation name (curl's exit and the backend's entry are "GET:<path>", the Python agent's
    # spans are named by the path alone).
    defs=$JQDEFS'
def one(svc; f): [seg(svc)[] | select(f)] | if length == 1 then .[0] else null end;
def chain(p): {c: one("'"$PYC_CURL"'"; .spans[0].operationName == "GET:" + p),
    a: one("'"$PYC_AGENT"'"; .spans[0].operationName == p),
    b: one("'"$PYC_BACKEND"'"; .spans[0].operationName == "GET:" + p)};
def entry: [.spans[] | select(.spanType == "Entry")] | if length == 1 then .[0] else null end;
def exit: [.spans[] | select(.spanType == "Exit")] | if length == 1 then .[0] else null end;
'
    check 'length == 6' "six segments (curl, the Python agent, python; two requests)"
    check "$defs"' (seg("'"$PYC_CURL"'") | length) == 2 and (seg("'"$PYC_AGENT"'") | length) == 2
        and (seg("'"$PYC_BACKEND"'") | length) == 2' "two segments per service"
    check "$defs"' ([$s[].traceId] | unique | length) == 2
        and ([$s[].traceSegmentId] | unique | length) == 6' "two traces, six distinct segments"
    for req in "/data.txt 200" "/missing.txt 404"; do
        set -- $req
        path=$1 st=$2
        err=$([ "$st" -ge 400 ] && echo true || echo false)
        check "$defs"' chain("'"$path"'") | .c != null and .a != null and .b != null
            and .c.traceId == .a.traceId and .a.traceId == .b.traceId' \
            "$path: one trace across curl, the Python agent and python"
        # The Python agent's segment: entry (span 0, the ref to curl) and exit (span 1, child of 0).
        check "$defs"' chain("'"$path"'") | .a as $a
            | $a.serviceInstance == "'"$PYC_AGENT_INSTANCE"'" and ($a.spans | length) == 2
            and ($a | root0)
            and ($a | entry | .spanId == 0 and .spanLayer == "Http" and .isError == '"$err"'
                and tag("http.method") == "GET" and tag("http.status_code") == "'"$st"'"
                and tag("http.url") == "http://127.0.0.1:'"$PYC_MID$path"'")
            and ($a | exit | .parentSpanId == 0 and .spanLayer == "Http" and .isError == '"$err"'
                and .operationName == "'"$path"'" and .peer == "127.0.0.1:'"$PYC_BACK"'"
                and tag("http.status_code") == "'"$st"'"
                and tag("http.url") == "http://127.0.0.1:'"$PYC_BACK$path"'")' \
            "$path: the Python agent's entry and exit spans"
        # They decode our sw8: the ref of their entry names curl's exit exactly.
        check "$defs"' chain("'"$path"'") | .c as $c | .a as $a
            | ($a | entry | .refs | length) == 1
            and ($a | entry | .refs[0] | .refType == "CrossProcess" and .traceId == $c.traceId
                and .parentTraceSegmentId == $c.traceSegmentId
                and .parentSpanId == $c.spans[0].spanId and .parentService == "'"$PYC_CURL"'"
                and .parentServiceInstance == $c.serviceInstance
                and .parentEndpoint == $c.spans[0].operationName
                and .networkAddressUsedAtPeer == $c.spans[0].peer
                and .networkAddressUsedAtPeer == "127.0.0.1:'"$PYC_MID"'")
            and ($c.spans[0] | .spanType == "Exit" and http_span("GET:'"$path"'"; "'"$st"'"))' \
            "$path: the Python agent's entry ref -> curl's exit (they decoded our sw8)"
        # We decode theirs: the backend's ref names the Python agent's exit exactly.
        check "$defs"' chain("'"$path"'") | .a as $a | .b as $b
            | ($b.spans | length) == 1 and ($b.spans[0].refs | length) == 1
            and ($b.spans[0].refs[0] | .refType == "CrossProcess" and .traceId == $a.traceId
                and .parentTraceSegmentId == $a.traceSegmentId
                and .parentSpanId == ($a | exit | .spanId) and .parentService == "'"$PYC_AGENT"'"
                and .parentServiceInstance == "'"$PYC_AGENT_INSTANCE"'"
                and .parentEndpoint == ($a | entry | .operationName)
                and .networkAddressUsedAtPeer == ($a | exit | .peer))
            and ($b.spans[0] | .spanType == "Entry" and http_span("GET:'"$path"'"; "'"$st"'"))' \
            "$path: python's entry ref -> the Python agent's exit (we decoded their sw8)"
    done
    check "$defs"' all($s[]; root0) and all($s[].spans[]; sane_times)' "roots and times of all segments"
}
