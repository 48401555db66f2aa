#!/usr/bin/env bash
# oap_interop_node.sh - the Node agent interop chain (tests/interop/interop_node.sh) reported to
# a real SkyWalking OAP 10.1.0 instead of collector-stub:
#   curl (swagent, oapnode-curl) -> node http server (SkyWalking's Node.js agent
#   skywalking-backend-js, not under LD_PRELOAD, oapnode-node) -> python3 -m http.server
#   (swagent, oapnode-python).
# Two requests (200 and 404). Checked through GraphQL: the OAP lists oapnode-curl, oapnode-node
# and oapnode-python; each request is one trace of 3 segments whose spans link across the agents
# (node's entry a ref to curl's exit, python's entry a ref to node's exit), the 404's in state
# ERROR; the topology is exactly curl -> node -> python; the OAP's log has no WARN or ERROR.
# Needs the ctest fixture interop_npm_install (NODE_MODULES).
E2E_NAME=oap_interop_node
. "$E2E_DIR/lib.sh"
. "$OAP_DIR/lib_oap.sh"
[ -f "$NODE_MODULES/skywalking-backend-js/package.json" ] ||
    { echo "FAIL: skywalking-backend-js not installed in $NODE_MODULES (fixture interop_npm_install)" >&2; exit 1; }
e2e_init
oap_start
mkdir "$T/www"
echo "from python" >"$T/www/data.txt"
start_server py traced oapnode-python python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/www"
PY=$PORT
start_node_peer oapnode-node oapnode-node-1 "127.0.0.1:$OAP_GRPC" "$PY"

body=$(traced oapnode-curl curl -sS "http://127.0.0.1:$NODE/data.txt") || fail "curl failed"
[ "$body" = "from python" ] || fail "body: $body"
code=$(traced oapnode-curl curl -sS -o /dev/null -w '%{http_code}' "http://127.0.0.1:$NODE/none.txt")
[ "$code" = 404 ] || fail "GET /none.txt: HTTP $code"
# swagent's side: curl's 2 and python's 2 segments (node's go through its own agent).
wait_for "[ \$(reporter_sent) -ge 4 ]" 30 || oap_fail agent "swagent's reporters sent $(reporter_sent) of 4 segments"

DM=$(oap_duration MINUTE)
DS=$(oap_duration SECOND)
gql_until '{ listServices { id name } }' \
    '[.listServices[].name] | sort == ["oapnode-curl", "oapnode-node", "oapnode-python"]' 60 \
    "the three services listed (curl by its keepAlive)"
T_SVC=$(jq -c '[.listServices[] | {(.id): .name}] | add' <<<"$GQL")

gql_until "{ queryBasicTraces(condition: {queryDuration: $DS, traceState: ALL, queryOrder: BY_START_TIME,
    paging: {pageNum: 1, pageSize: 50}}) { traces { segmentId isError traceIds } } }" \
    '.queryBasicTraces.traces | length >= 6' 60 "6 segments (the Node.js agent reports on its own)"
expect '.queryBasicTraces.traces | length == 6
    and ([.[].traceIds[0]] | group_by(.) | map(length)) == [3,3]' "6 segments, 3 in each of 2 traces"
for tid in $(jq -r '[.queryBasicTraces.traces[].traceIds[0]] | unique | .[]' <<<"$GQL"); do
    GQL=$(gql "{ queryTrace(traceId: \"$tid\") { spans { segmentId spanId parentSpanId serviceCode
        endpointName type peer isError refs { parentSegmentId parentSpanId type } } } }")
    expect '.queryTrace.spans as $s
        | [$s[] | select(.serviceCode == "oapnode-curl" and .type == "Exit")] as $c
        | [$s[] | select(.serviceCode == "oapnode-node" and .type == "Entry")] as $ne
        | [$s[] | select(.serviceCode == "oapnode-node" and .type == "Exit")] as $nx
        | [$s[] | select(.serviceCode == "oapnode-python" and .type == "Entry")] as $p
        | ($s | length) == 4 and ([$c, $ne, $nx, $p] | map(length)) == [1,1,1,1]
        and $c[0].refs == [] and $c[0].peer == "127.0.0.1:'"$NODE"'"
        and $ne[0].refs == [{parentSegmentId: $c[0].segmentId, parentSpanId: $c[0].spanId,
            type: "CROSS_PROCESS"}]
        and $nx[0].segmentId == $ne[0].segmentId and $nx[0].peer == "127.0.0.1:'"$PY"'"
        and $p[0].refs == [{parentSegmentId: $nx[0].segmentId, parentSpanId: $nx[0].spanId,
            type: "CROSS_PROCESS"}]
        and ([$s[] | .isError] | unique | length) == 1
        and (($p[0].endpointName == "GET:/none.txt") == $p[0].isError)' \
        "trace $tid: curl exit (swagent) -> node entry, exit (Node.js agent) -> python entry (swagent)"
done

gql_until "{ getGlobalTopology(duration: $DM) { nodes { id name isReal } calls { source target detectPoints } } }" \
    '.getGlobalTopology as $g | '"$T_SVC"' as $n
    | ([$g.nodes[].name] | sort) == ["oapnode-curl", "oapnode-node", "oapnode-python"]
    and ([$g.calls[] | "\($n[.source]) -> \($n[.target]) \(.detectPoints | sort)"] | sort)
        == ["oapnode-curl -> oapnode-node [\"CLIENT\",\"SERVER\"]",
            "oapnode-node -> oapnode-python [\"CLIENT\",\"SERVER\"]"]' 90 \
    "topology oapnode-curl -> oapnode-node -> oapnode-python, no other node or call"
oap_log_check
echo "ok oap_interop_node"
