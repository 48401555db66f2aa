#!/usr/bin/env bash
# oap_interop_python.sh - the Python agent interop chain (tests/interop/python_chain.sh, the
# scenario of interop_python) reported to a real SkyWalking OAP 10.1.0 instead of
# collector-stub:
#   curl (swagent, oappy-curl) -> python http.server traced by SkyWalking's Python agent
#   (apache-skywalking, not under LD_PRELOAD, oappy-agent) -> python3 -m http.server (swagent,
#   oappy-python).
# Two requests (200 and a relayed 404). Checked through GraphQL, as the UI reads it:
#   - listServices: the three services, in layer GENERAL (the Python agent's and swagent's
#     servers from their entry spans, curl from swagent's heartbeat);
#   - listInstances: the Python agent's instance, language PYTHON (its own property), and
#     swagent's, language UNKNOWN (swagent sends language=native; the OAP takes the property
#     for its language field, which has no value for a native program: docs/oap.md) and the
#     attribute agent=swagent <version>;
#   - queryBasicTraces: 6 segments in 2 traces, the 404's 3 segments in state ERROR;
#   - queryTrace: 4 spans per trace, the Python agent's entry a CROSS_PROCESS ref to curl's exit
#     (it decoded our sw8), its exit a child of its entry, python's entry a ref to the Python
#     agent's exit (we decoded theirs); component Python (7000) on the Python agent's spans,
#     http on swagent's; errors on every span of the 404;
#   - findEndpoint: the endpoints as each agent names them ("/data.txt" by the Python agent,
#     "GET:/data.txt" by swagent);
#   - getGlobalTopology: exactly curl -> agent -> python, each call seen by client and server;
#   - the OAP's log has no WARN or ERROR, and the Python agent logged no error (its calls to the
#     OAP were all answered).
# Needs the ctest fixture interop_pip_install (PY_VENV).
E2E_NAME=oap_interop_python
. "$E2E_DIR/lib.sh"
. "$OAP_DIR/lib_oap.sh"
. "$INTEROP_DIR/python_chain.sh"
PYC_CURL=oappy-curl PYC_AGENT=oappy-agent PYC_AGENT_INSTANCE=oappy-agent-1 PYC_BACKEND=oappy-python
e2e_init
oap_start
python_chain_start
python_chain_requests
# swagent's side: curl's 2 and python's 2 segments (the Python agent reports on its own).
wait_for "[ \$(reporter_sent) -ge 4 ]" 30 || oap_fail agent "swagent's reporters sent $(reporter_sent) of 4 segments"

DM=$(oap_duration MINUTE)
DS=$(oap_duration SECOND)
gql_until '{ listServices { id name layers } }' \
    '[.listServices[].name] | sort == ["oappy-agent", "oappy-curl", "oappy-python"]' 60 \
    "the three services listed"
expect 'all(.listServices[]; .layers == ["GENERAL"])' "the three services in layer GENERAL"
T_SVC=$(jq -c '[.listServices[] | {(.id): .name}] | add' <<<"$GQL")
sid() { jq -r --arg n "$1" 'to_entries[] | select(.value == $n) | .key' <<<"$T_SVC"; }

gql_until "{ listInstances(duration: $DM, serviceId: \"$(sid oappy-agent)\") { name language attributes { name value } } }" \
    '.listInstances | length == 1' 60 "the Python agent's instance"
expect '.listInstances[0] | .name == "'"$PYC_AGENT_INSTANCE"'" and .language == "PYTHON"
    and (.attributes | from_entries | .["Process No."] == "'"$PYC_MID_PID"'")' \
    "the Python agent's instance: its name, language PYTHON, its pid"
gql_until "{ listInstances(duration: $DM, serviceId: \"$(sid oappy-python)\") { name language attributes { name value } } }" \
    '.listInstances | length == 1' 60 "swagent's python instance"
expect '.listInstances[0] | .language == "UNKNOWN"
    and (.attributes | from_entries | (.agent | startswith("swagent ")) and (.executable | startswith("python3")))' \
    "swagent's instance: language UNKNOWN (the OAP has no value for native), agent=swagent"

gql_until "{ queryBasicTraces(condition: {queryDuration: $DS, traceState: ALL, queryOrder: BY_START_TIME,
    paging: {pageNum: 1, pageSize: 50}}) { traces { segmentId isError traceIds } } }" \
    '.queryBasicTraces.traces | length >= 6' 60 "6 segments (the Python agent reports on its own)"
expect '.queryBasicTraces.traces | length == 6
    and ([.[].traceIds[0]] | group_by(.) | map(length)) == [3,3]
    and ([.[] | select(.isError) | .traceIds[0]] | length == 3 and (unique | length) == 1)' \
    "6 segments, 3 in each of 2 traces, the 3 of one trace in state ERROR"
for tid in $(jq -r '[.queryBasicTraces.traces[].traceIds[0]] | unique | .[]' <<<"$GQL"); do
    GQL=$(gql "{ queryTrace(traceId: \"$tid\") { spans { segmentId spanId parentSpanId serviceCode
        serviceInstanceName endpointName type peer component layer isError
        refs { parentSegmentId parentSpanId type } } } }")
    expect '.queryTrace.spans as $s
        | [$s[] | select(.serviceCode == "oappy-curl" and .type == "Exit")] as $c
        | [$s[] | select(.serviceCode == "oappy-agent" and .type == "Entry")] as $ae
        | [$s[] | select(.serviceCode == "oappy-agent" and .type == "Exit")] as $ax
        | [$s[] | select(.serviceCode == "oappy-python" and .type == "Entry")] as $p
        | ($p[0].endpointName | ltrimstr("GET:")) as $path
        | ($path == "/missing.txt") as $err
        | ($s | length) == 4 and ([$c, $ae, $ax, $p] | map(length)) == [1,1,1,1]
        and ($path == "/data.txt" or $err)
        and $c[0].refs == [] and $c[0].parentSpanId == -1 and $c[0].peer == "127.0.0.1:'"$PYC_MID"'"
        and $c[0].endpointName == "GET:" + $path
        and $ae[0].refs == [{parentSegmentId: $c[0].segmentId, parentSpanId: $c[0].spanId,
            type: "CROSS_PROCESS"}]
        and $ae[0].serviceInstanceName == "'"$PYC_AGENT_INSTANCE"'" and $ae[0].endpointName == $path
        and $ax[0].segmentId == $ae[0].segmentId and $ax[0].parentSpanId == $ae[0].spanId
        and $ax[0].refs == [] and $ax[0].peer == "127.0.0.1:'"$PYC_BACK"'"
        and $p[0].refs == [{parentSegmentId: $ax[0].segmentId, parentSpanId: $ax[0].spanId,
            type: "CROSS_PROCESS"}]
        and ([$ae[0], $ax[0]] | all(.component == "Python" and .layer == "Http"))
        and ([$c[0], $p[0]] | all(.component == "http" and .layer == "Http"))
        and all($s[]; .isError == $err)' \
        "trace $tid: curl exit (swagent) -> agent entry, exit (Python agent) -> python entry (swagent)"
done

for s in "oappy-agent /" "oappy-python GET:/"; do
    set -- $s
    gql_until "{ findEndpoint(serviceId: \"$(sid "$1")\", keyword: \"\", limit: 20) { name } }" \
        '[.findEndpoint[].name] | sort == ["'"$2"'data.txt", "'"$2"'missing.txt"]' 30 "the endpoints of $1"
done

gql_until "{ getGlobalTopology(duration: $DM) { nodes { id name isReal } calls { source target detectPoints } } }" \
    '.getGlobalTopology as $g | '"$T_SVC"' as $n
    | ([$g.nodes[].name] | sort) == ["oappy-agent", "oappy-curl", "oappy-python"]
    and all($g.nodes[]; .isReal)
    and ([$g.calls[] | "\($n[.source]) -> \($n[.target]) \(.detectPoints | sort)"] | sort)
        == ["oappy-agent -> oappy-python [\"CLIENT\",\"SERVER\"]",
            "oappy-curl -> oappy-agent [\"CLIENT\",\"SERVER\"]"]' 90 \
    "topology oappy-curl -> oappy-agent -> oappy-python, no other node or call"
oap_log_check
grep -e 'Traceback' -e '\[ERROR\]' "$T/pyagent.err" && oap_fail agent "the Python agent logged an error"
echo "ok oap_interop_python"
