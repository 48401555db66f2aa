#!/usr/bin/env bash
# interop_node.sh - interop with an official SkyWalking agent of another language:
#   curl (swagent) -> node http server (SkyWalking's Node.js agent skywalking-backend-js, NOT
#   under LD_PRELOAD) -> python3 -m http.server (swagent),
# all reporting to one collector-stub. Checks: one trace id across the three services; node's
# entry ref points at curl's exit (parent segment id, span id, service, instance,
# networkAddressUsedAtPeer == curl's exit peer), so the Node.js agent decodes our sw8
# (skywalking-backend-js 0.9.0 never fills parentEndpoint in the refs it reports, so an empty
# one is accepted there);
# python's ref points at node's exit span and its networkAddressUsedAtPeer equals node's exit
# peer, so we decode theirs; and collector-stub accepted a real agent's stream (segments and
# management calls). Needs the ctest fixture interop_npm_install (npm ci into the build tree):
# NODE_MODULES names its node_modules directory.
E2E_NAME=interop_node
. "$E2E_DIR/lib.sh"
[ -f "$NODE_MODULES/skywalking-backend-js/package.json" ] ||
    { echo "FAIL: skywalking-backend-js not installed in $NODE_MODULES (fixture interop_npm_install)" >&2; exit 1; }
command -v node >/dev/null || { echo "FAIL: node not found" >&2; exit 1; }
e2e_init
start_stub
mkdir "$T/www"
echo "from python" >"$T/www/data.txt"
start_server py traced e2e-python python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/www"
PY=$PORT
start_node_peer e2e-node e2e-node-1 "$COLLECTOR" "$PY"
tr '\0' '\n' <"/proc/$NODE_PID/environ" | grep -q '^LD_PRELOAD=' && fail "node runs under LD_PRELOAD"
grep -q libswagent "/proc/$NODE_PID/maps" && fail "libswagent.so is loaded in node"

body=$(traced e2e-curl curl -sS "http://127.0.0.1:$NODE/data.txt") || fail "curl failed"
[ "$body" = "from python" ] || fail "body: $body"
wait_segments 3 30
T_END=$(now_ms)
check 'length == 3' "three segments (curl, node, python)"
check "$JQDEFS"' ([$s[].traceId] | unique | length) == 1' "one trace id across the 3 services"
check "$JQDEFS"' (seg("e2e-curl") | length) == 1 and (seg("e2e-node") | length) == 1
    and (seg("e2e-python") | length) == 1' "one segment per service"
# Node's segment: an entry (with the ref to curl) and an exit (to python).
check "$JQDEFS"' seg("e2e-node")[0] as $n | seg("e2e-curl")[0] as $c
    | ($n.spans | map(select(.spanType == "Entry"))) as $e
    | ($e | length) == 1 and ($e[0].refs | length) == 1
    and ($e[0].refs[0] | .traceId == $c.traceId and .parentTraceSegmentId == $c.traceSegmentId
        and .parentSpanId == $c.spans[0].spanId and .parentService == "e2e-curl"
        and .parentServiceInstance == $c.serviceInstance
        and (.parentEndpoint == $c.spans[0].operationName or .parentEndpoint == "")
        and .networkAddressUsedAtPeer == $c.spans[0].peer
        and .networkAddressUsedAtPeer == "127.0.0.1:'"$NODE"'")' \
    "node entry ref -> curl exit (the Node.js agent decoded our sw8)"
check "$JQDEFS"' seg("e2e-node")[0] as $n | seg("e2e-python")[0] as $p
    | ($n.spans | map(select(.spanType == "Exit"))) as $x
    | ($x | length) == 1 and ($p.spans[0].refs | length) == 1
    and ($p.spans[0].refs[0] | .traceId == $n.traceId and .parentTraceSegmentId == $n.traceSegmentId
        and .parentSpanId == $x[0].spanId and .parentService == "e2e-node"
        and .parentServiceInstance == "e2e-node-1"
        and .networkAddressUsedAtPeer == $x[0].peer
        and .networkAddressUsedAtPeer == "127.0.0.1:'"$PY"'")
    and ($p.spans[0] | .spanType == "Entry" and http_span("GET:/data.txt"; "200"))' \
    "python ref -> node exit (we decoded the Node.js agent's sw8)"
check "$JQDEFS"' all($s[]; root0) and all($s[].spans[]; sane_times)' "roots and times of all segments"
# The stub takes the Node.js agent's management calls too (it sends them every 20 s).
wait_for "grep -q '\"keepAlive\",\"service\":\"e2e-node\"' '$T/mgmt.json'" 30 ||
    fail "no keepAlive from the Node.js agent"
check '[.[] | select(.method == "reportInstanceProperties" and .service == "e2e-node")] | length >= 1
    and all(.[] | select(.method == "reportInstanceProperties" and .service == "e2e-node");
        .serviceInstance == "e2e-node-1"
        and ([.properties[] | select(.key == "language" and .value == "NodeJS")] | length) == 1
        and ([.properties[] | select(.key == "Process No." and .value == "'"$NODE_PID"'")] | length) == 1)' \
    "reportInstanceProperties of the Node.js agent" "$T/mgmt.json"
echo "ok interop_node"
