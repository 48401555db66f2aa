#!/usr/bin/env bash
# oap_demo.sh - the demo chain traced into a real SkyWalking OAP 10.1.0 (scripts/oap.sh) and
# checked through the OAP's GraphQL API, the one its UI reads:
#   curl (curl-client) -> nginx, 2 workers (nginx-proxy) -> python3 -m http.server (python-backend)
# every program under LD_PRELOAD=libswagent.so, reporting through swagent-reporter (started on
# demand) over gRPC to the OAP. Three requests for /api/orders.json (200) and one for
# /api/missing.json (404, an error). Checks, each polled with a bound since the OAP persists
# and caches with a delay:
#   - the reporters sent all 12 segments (else the failure is on the agent side);
#   - listServices: curl-client, nginx-proxy and python-backend (layer GENERAL; curl-client,
#     which serves nothing, from its processes' keepAlive), their instances, and on each instance
#     swagent's properties (agent, Process No. of one of the service's processes, executable,
#     the swagent.segments.* counters);
#   - queryBasicTraces: 12 segments in 4 traces, the 3 segments of the 404 trace, and only
#     those, in state ERROR;
#   - queryTrace of each trace: 4 spans, curl's exit -> nginx's entry (a CROSS_PROCESS ref to
#     curl's segment and exit span) -> nginx's exit (child of the entry) -> python's entry (a
#     ref to nginx's exit), endpoint GET:/api/..., peers, component http, isError of the 404;
#   - findEndpoint: the endpoints the UI lists (GET:/api/orders.json, GET:/api/missing.json);
#   - getGlobalTopology: exactly the nodes curl-client, nginx-proxy, python-backend (all real)
#     and the calls curl -> nginx -> python, each seen by client and server: no "User" node, no
#     conjectured peer address node;
#   - execExpression (the UI's dashboards' MQE): python-backend's service_cpm counts its calls,
#     and the other metrics of the UI's service, instance, endpoint and relation dashboards
#     (response time, SLA, Apdex, percentiles, calls per minute) have values;
#   - the OAP's log has no WARN or ERROR from the time it was ready.
# Every listener of the OAP is on 127.0.0.1.
E2E_NAME=oap_demo
. "$E2E_DIR/lib.sh"
. "$OAP_DIR/lib_oap.sh"
e2e_init
oap_start
ss -ltnp 2>/dev/null | grep "pid=$OAP_PID," >"$T/listen.txt" || true
[ -s "$T/listen.txt" ] || oap_fail OAP "no listening socket of the OAP (pid $OAP_PID) found"
if grep -v -E '(127\.0\.0\.1|\[::ffff:127\.0\.0\.1\]):[0-9]+ ' "$T/listen.txt"; then
    oap_fail OAP "the OAP listens beyond loopback: $(cat "$T/listen.txt")"
fi

start_orders_backend python-backend
PY_PID=$LAST_PID
NGX=$(free_port)
top=("worker_processes 2;")
[ "$(id -u)" -eq 0 ] && top+=("user root;")
nginx_proxy_conf "$NGX" "$PY" "${top[@]}"
traced nginx-proxy nginx -c "$T/ngx/nginx.conf" -p "$T/ngx" -g 'daemon off;' >"$T/nginx.out" 2>&1 &
PIDS="$PIDS $!"
wait_for "(exec 3<>/dev/tcp/127.0.0.1/$NGX) 2>/dev/null" 10 || fail "nginx did not start"
NGX_PIDS="$(cat "$T/ngx/x.nginx.pid") $(ps -o pid= --ppid "$(cat "$T/ngx/x.nginx.pid")" | tr '\n' ' ')"

CURL_PIDS=""
for path in orders orders orders missing; do
    env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=curl-client curl -sS -o "$T/body" -w '%{http_code}' \
        "http://127.0.0.1:$NGX/api/$path.json" >"$T/code" &
    CURL_PIDS="$CURL_PIDS $!"
    wait $! || fail "curl failed"
    want=200
    [ $path = missing ] && want=404
    [ "$(cat "$T/code")" = $want ] || fail "GET /api/$path.json: HTTP $(cat "$T/code")"
done

# The agent side: 3 segments per request left through the reporter.
wait_for "[ \$(reporter_sent) -ge 12 ]" 30 ||
    oap_fail agent "the reporters sent $(reporter_sent) of 12 segments"
echo "agent side: $(reporter_sent) segments sent to the OAP"

DM=$(oap_duration MINUTE)
DS=$(oap_duration SECOND)
SVCS='["curl-client","nginx-proxy","python-backend"]'
# The OAP lists a service from its entry spans or its instances' keepAlive: curl-client, which
# only calls out, is listed because the reporter sends each process's first heartbeat (a
# keepAlive with it) even when the process has already exited.
gql_until '{ listServices { id name layers normal } }' \
    '[.listServices[].name] | sort == '"$SVCS" 60 "the three services listed"
expect 'all(.listServices[]; .layers == ["GENERAL"] and .normal)' \
    "curl-client, nginx-proxy and python-backend in layer GENERAL"
SERVICES=$GQL
sid() { jq -r --arg n "$1" '.listServices[] | select(.name == $n) | .id' <<<"$SERVICES"; }

# Instances with swagent's properties. A process's counters are reported periodically, so
# python's (the one process of its service) are polled until they show its 4 segments.
check_instances() { # SERVICE PIDS EXE-REGEX COUNT-CONDITION
    gql_until "{ listInstances(duration: $DM, serviceId: \"$(sid "$1")\") { name language attributes { name value } } }" \
        ".listInstances | $4" 60 "instances of $1"
    expect "[.listInstances[] | .attributes | from_entries] | all(. as \$i |
        .agent == \"swagent $SW_VERSION\" and .[\"OS Name\"] == \"Linux\"
        and (.[\"Process No.\"] | IN($(echo $2 | sed 's/[0-9]*/"&"/g; s/ /, /g')))
        and (.executable | test(\"$3\"))
        and ([\"committed\", \"sent\", \"spooled\", \"replayed\", \"shed\"]
            | all(. as \$k | \$i[\"swagent.segments.\" + \$k] | test(\"^[0-9]+\$\")))
        and .[\"swagent.segments.dropped\"] == \"0\" and .[\"swagent.segments.failed\"] == \"0\")" \
        "swagent's instance properties on every instance of $1"
}
SW_VERSION=$("$SWAGENT_CLI" --version | awk '{print $NF}')
check_instances python-backend "$PY_PID" '^python3' \
    'length == 1 and (.[0].attributes | from_entries | .["swagent.segments.sent"] == "4")'
# nginx's workers inherit their master's instance name: one instance, whose counters are the
# sums over the workers (its 4 segments, whichever worker served them; they used to be the
# counters of whichever worker reported last) and Process No. one of its pids.
check_instances nginx-proxy "$NGX_PIDS" '^nginx$' \
    'length == 1 and (.[0].attributes | from_entries | .["swagent.segments.committed"] == "4"
        and .["swagent.segments.sent"] == "4" and (.["swagent.processes"] | IN("1", "2")))'
# curl-client: one instance per curl process (4), each with the counters of its one segment.
check_instances curl-client "$CURL_PIDS" '^curl$' \
    'length == 4 and all(.[]; .attributes | from_entries | .["swagent.segments.committed"] == "1")'

# Traces: 12 segments in 4 traces, the 404's in state ERROR.
basic() { # STATE
    echo "{ queryBasicTraces(condition: {queryDuration: $DS, traceState: $1, queryOrder: BY_START_TIME,
        paging: {pageNum: 1, pageSize: 50}}) { traces { segmentId endpointNames isError traceIds } } }"
}
gql_until "$(basic ALL)" '.queryBasicTraces.traces | length >= 12' 60 "12 segments in queryBasicTraces"
expect '.queryBasicTraces.traces | length == 12
    and ([.[].traceIds[0]] | group_by(.) | map(length)) == [3,3,3,3]' "12 segments, 3 in each of 4 traces"
ALL=$GQL
gql_until "$(basic ERROR)" '.queryBasicTraces.traces | length >= 3' 30 "the error trace"
expect '.queryBasicTraces.traces | length == 3 and ([.[].traceIds[0]] | unique | length) == 1
    and all(.[]; .isError and .endpointNames == ["GET:/api/missing.json"])' \
    "the 404's trace, and only it, is an error trace"
ERR_TRACE=$(jq -r '.queryBasicTraces.traces[0].traceIds[0]' <<<"$GQL")

# Each trace: its spans and their parents across the three services.
for tid in $(jq -r '[.queryBasicTraces.traces[].traceIds[0]] | unique | .[]' <<<"$ALL"); do
    path=orders err=false code=200
    [ "$tid" = "$ERR_TRACE" ] && path=missing err=true code=404
    GQL=$(gql "{ queryTrace(traceId: \"$tid\") { spans { traceId segmentId spanId parentSpanId
        refs { traceId parentSegmentId parentSpanId type } serviceCode serviceInstanceName
        endpointName type peer component isError layer tags { key value } } } }")
    expect '.queryTrace.spans as $s
        | ($s | length) == 4
        | [$s[] | select(.serviceCode == "curl-client")] as $c
        | [$s[] | select(.serviceCode == "nginx-proxy" and .type == "Entry")] as $ne
        | [$s[] | select(.serviceCode == "nginx-proxy" and .type == "Exit")] as $nx
        | [$s[] | select(.serviceCode == "python-backend")] as $p
        | ($c | length) == 1 and ($ne | length) == 1 and ($nx | length) == 1 and ($p | length) == 1
        and $c[0].type == "Exit" and $c[0].parentSpanId == -1 and $c[0].refs == []
        and $c[0].peer == "127.0.0.1:'"$NGX"'"
        and $ne[0].refs == [{traceId: "'"$tid"'", parentSegmentId: $c[0].segmentId,
            parentSpanId: $c[0].spanId, type: "CROSS_PROCESS"}]
        and $ne[0].parentSpanId == -1
        and $nx[0].segmentId == $ne[0].segmentId and $nx[0].parentSpanId == $ne[0].spanId
        and $nx[0].refs == [] and $nx[0].peer == "127.0.0.1:'"$PY"'"
        and $p[0].type == "Entry" and $p[0].parentSpanId == -1
        and $p[0].refs == [{traceId: "'"$tid"'", parentSegmentId: $nx[0].segmentId,
            parentSpanId: $nx[0].spanId, type: "CROSS_PROCESS"}]
        and all($s[]; .traceId == "'"$tid"'" and .endpointName == "GET:/api/'$path'.json"
            and .component == "http" and .layer == "Http" and .isError == '$err'
            and (.tags | from_entries | .["http.method"] == "GET"
                and .["http.status_code"] == "'$code'"))' \
        "trace $tid: curl exit -> nginx entry -> nginx exit -> python entry (GET /api/$path.json)"
done

# Endpoints as the UI lists them.
for s in nginx-proxy python-backend; do
    gql_until "{ findEndpoint(serviceId: \"$(sid $s)\", keyword: \"\", limit: 20) { name } }" \
        '[.findEndpoint[].name] | sort == ["GET:/api/missing.json", "GET:/api/orders.json"]' 30 \
        "the endpoints of $s"
done

# The topology: the chain and nothing else. Until the OAP's cache of peer addresses (refreshed
# every few seconds) maps nginx's and python's addresses to those services, the callers' exit
# spans show as calls to nodes named "127.0.0.1:port"; the bound allows for that.
T_SVC=$(jq -c '[.listServices[] | {(.id): .name}] | add' <<<"$SERVICES")
gql_until "{ getGlobalTopology(duration: $DM) { nodes { id name type isReal } calls { source target detectPoints } } }" \
    '.getGlobalTopology as $g | '"$T_SVC"' as $n
    | ([$g.nodes[].name] | sort) == '"$SVCS"' and all($g.nodes[]; .isReal)
    and ([$g.calls[] | "\($n[.source]) -> \($n[.target]) \(.detectPoints | sort)"] | sort)
        == ["curl-client -> nginx-proxy [\"CLIENT\",\"SERVER\"]",
            "nginx-proxy -> python-backend [\"CLIENT\",\"SERVER\"]"]' 90 \
    "topology curl-client -> nginx-proxy -> python-backend, no other node or call"

# The metrics the UI's dashboards read (MQE): python-backend's calls per minute.
gql_until "{ execExpression(expression: \"sum(service_cpm)\", entity: {serviceName: \"python-backend\", normal: true},
    duration: $DM) { type error results { values { value } } } }" \
    '.execExpression.results[0].values | map(.value // "0" | tonumber) | add == 4' 60 \
    "python-backend's service_cpm adds up to its 4 calls"
# The other metrics of the UI's service, instance, endpoint and topology dashboards have values.
PY_INST=$(jq -r '.listInstances[0].name' <<<"$(gql "{ listInstances(duration: $DM, serviceId: \"$(sid python-backend)\") { name } }")")
for m in "service_resp_time service_sla service_apdex service_percentile{p='50,99'}|serviceName: \"python-backend\", normal: true" \
    "service_instance_cpm service_instance_resp_time service_instance_sla|serviceName: \"python-backend\", normal: true, serviceInstanceName: \"$PY_INST\"" \
    "endpoint_cpm endpoint_resp_time endpoint_sla endpoint_percentile{p='50,99'}|serviceName: \"python-backend\", normal: true, endpointName: \"GET:/api/orders.json\"" \
    "service_relation_server_cpm service_relation_server_resp_time|serviceName: \"nginx-proxy\", normal: true, destServiceName: \"python-backend\", destNormal: true"; do
    for e in ${m%%|*}; do
        gql_until "{ execExpression(expression: \"$e\", entity: {${m#*|}}, duration: $DM)
            { type error results { values { value } } } }" \
            '.execExpression.error == null and ([.execExpression.results[].values[] | .value // empty] | length) > 0' 60 \
            "the UI's metric $e has a value (entity ${m#*|})"
    done
done
# The client side of a call (its exit span) names the server by the address it called. The
# OAP maps that address to a service once the server's entry span has told it (a cache
# refreshed every few seconds); the client side of calls made before is not counted for
# nginx -> python (the demo's 4 requests, made right after the backends started). A request
# made once the topology was resolved counts there on both sides.
code=$(traced curl-client curl -sS -o /dev/null -w '%{http_code}' "http://127.0.0.1:$NGX/api/orders.json")
[ "$code" = 200 ] || fail "GET /api/orders.json after the topology: HTTP $code"
DM=$(oap_duration MINUTE)
for e in service_relation_client_cpm service_relation_client_resp_time; do
    gql_until "{ execExpression(expression: \"$e\", entity: {serviceName: \"nginx-proxy\", normal: true,
        destServiceName: \"python-backend\", destNormal: true}, duration: $DM) { error results { values { value } } } }" \
        '.execExpression.error == null and ([.execExpression.results[].values[] | .value // empty] | length) > 0' 60 \
        "$e nginx -> python of a call made once the OAP knew python's address"
done

# Two processes of one instance name (what a prefork server's workers are; here two python
# servers with SW_AGENT_INSTANCE_NAME=shared-1), two requests each: the OAP shows one instance
# whose properties don't depend on which process reported last: Process No. the lower pid,
# swagent.processes 2, the counters summed (4 committed and sent; one process's were 2).
SHARED_PIDS=""
for k in 1 2; do
    start_server shared$k env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=shared-svc \
        SW_AGENT_INSTANCE_NAME=shared-1 python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/www"
    SHARED_PIDS="$SHARED_PIDS $LAST_PID"
    for i in 1 2; do
        curl -sS -o /dev/null "http://127.0.0.1:$PORT/api/orders.json" || fail "shared$k: curl failed"
    done
done
LOW_PID=$(printf '%s\n' $SHARED_PIDS | sort -n | head -1)
gql_until '{ listServices { id name } }' '[.listServices[].name] | index("shared-svc") != null' 60 \
    "shared-svc listed"
gql_until "{ listInstances(duration: $DM, serviceId: \"$(jq -r '.listServices[] | select(.name == "shared-svc") | .id' <<<"$GQL")\")
    { name attributes { name value } } }" \
    '.listInstances | length == 1 and (.[0].attributes | from_entries
        | .["swagent.segments.committed"] == "4" and .["swagent.segments.sent"] == "4")' 60 \
    "one instance shared-1 with the 4 segments of its two processes"
expect '.listInstances[0] | .name == "shared-1" and (.attributes | from_entries
    | .["Process No."] == "'"$LOW_PID"'" and .["swagent.processes"] == "2")' \
    "shared-1: Process No. the lower of its two pids, swagent.processes 2"

oap_log_check
echo "ok oap_demo"
