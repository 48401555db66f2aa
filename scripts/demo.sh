#!/usr/bin/env bash
# The demo: a real call chain traced by swagent, its trace printed as the SkyWalking UI shows it.
#
#   curl  ->  nginx (reverse proxy, master + 2 workers)  ->  python3 -m http.server
#
# Every program runs unmodified under `swagent run` (LD_PRELOAD=libswagent.so). Their segments
# go through the shared-memory rings to swagent-reporter (started on demand by the first traced
# process) and over gRPC to collector-stub, which writes them as JSON lines; `collector-stub
# tree` renders the joined trace. Everything listens on 127.0.0.1 only and is stopped at exit.
#
# scripts/demo.sh --oap: the same chain traced into a real SkyWalking OAP 10.1.0 instead
# (scripts/oap.sh: started if none is running, fetched from Maven Central on first use, and
# left running afterwards so its data can be looked at). The demo then prints the trace, the
# services and the topology as the OAP's GraphQL API (what the UI reads) shows them, and the
# OAP's address. Ports: SWAGENT_OAP_GRPC_PORT (11800), SWAGENT_OAP_HTTP_PORT (12800).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OAP=""
case ${1:-} in
--oap) OAP=1 ;;
"") ;;
*) echo "usage: scripts/demo.sh [--oap]" >&2; exit 2 ;;
esac
scripts/deps.sh
BUILD=${SW_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j"$(nproc)" >/dev/null
B=$ROOT/$BUILD

T=$(mktemp -d /tmp/swagent-demo.XXXXXX)
chmod 755 "$T"
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    kill "$(cat "$T/nginx.pid" 2>/dev/null)" 2>/dev/null || true
    sleep 0.3
    rm -rf "$T"
}
trap cleanup EXIT INT TERM

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Every traced process of this demo reads this config and nothing else of the machine's.
cat >"$T/agent.config" <<CFG
collector.heartbeat_period=\${SW_AGENT_COLLECTOR_HEARTBEAT_PERIOD:5}
swagent.reporter_idle_exit=\${SW_AGENT_REPORTER_IDLE_EXIT:3}
swagent.runtime_dir=$T/run
swagent.reporter_path=$B/agent/swagent-reporter
CFG
mkdir -m 700 "$T/run"
export SW_AGENT_CONFIG=$T/agent.config

if [ -n "$OAP" ]; then
    OAP_GRPC=${SWAGENT_OAP_GRPC_PORT:-11800}
    OAP_HTTP=${SWAGENT_OAP_HTTP_PORT:-12800}
    if ! scripts/oap.sh status >/dev/null 2>&1; then
        scripts/oap.sh start
    fi
    scripts/oap.sh wait
    COLLECTOR=127.0.0.1:$OAP_GRPC
else
    "$B/collector-stub/collector-stub" --listen 127.0.0.1:0 --port-file "$T/stub.port" \
        --segments "$T/segments.json" --management "$T/management.json" 2>"$T/stub.log" &
    PIDS+=($!)
    for _ in $(seq 50); do [ -s "$T/stub.port" ] && break; sleep 0.1; done
    COLLECTOR=127.0.0.1:$(cat "$T/stub.port")
fi

PY_PORT=$(free_port)
NGINX_PORT=$(free_port)
mkdir -p "$T/www/api" "$T/nginx"
echo '{"orders": [1, 2, 3]}' >"$T/www/api/orders.json"

SW="$B/agent/swagent run --collector $COLLECTOR"
$SW --service python-backend -- python3 -m http.server "$PY_PORT" --bind 127.0.0.1 \
    --directory "$T/www" >"$T/python.log" 2>&1 &
PIDS+=($!)

cat >"$T/nginx/nginx.conf" <<CONF
worker_processes 2;
pid $T/nginx.pid;
error_log $T/nginx/error.log;
$( [ "$(id -u)" -eq 0 ] && echo "user root;" )
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path $T/nginx/body;
    proxy_temp_path $T/nginx/proxy;
    fastcgi_temp_path $T/nginx/fastcgi;
    uwsgi_temp_path $T/nginx/uwsgi;
    scgi_temp_path $T/nginx/scgi;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location / {
            proxy_pass http://127.0.0.1:$PY_PORT;
            proxy_http_version 1.1;
        }
    }
}
CONF
$SW --service nginx-proxy -- nginx -c "$T/nginx/nginx.conf" -p "$T/nginx" -g 'daemon off;' \
    >"$T/nginx/out.log" 2>&1 &
PIDS+=($!)

# Wait until both servers accept connections (a bare connect sends no HTTP, so no span).
for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$PY_PORT") 2>/dev/null && \
        (exec 3<>"/dev/tcp/127.0.0.1/$NGINX_PORT") 2>/dev/null && break
    sleep 0.1
done

T0=$(date -u -d '-1 sec' '+%Y-%m-%d %H%M%S')
echo "\$ swagent run --service curl-client -- curl http://127.0.0.1:$NGINX_PORT/api/orders.json"
$SW --service curl-client -- curl -sS "http://127.0.0.1:$NGINX_PORT/api/orders.json"

if [ -z "$OAP" ]; then
    for _ in $(seq 100); do
        [ "$(wc -l <"$T/segments.json")" -ge 3 ] && break
        sleep 0.1
    done
    echo
    echo "\$ collector-stub tree segments.json"
    "$B/collector-stub/collector-stub" tree "$T/segments.json"
    exit 0
fi

# --oap: what the OAP shows, through its GraphQL API.
gql() {
    curl -sS -m 10 -X POST -H 'Content-Type: application/json' \
        --data "$(jq -cn --arg q "$1" '{query: $q}')" "http://127.0.0.1:$OAP_HTTP/graphql"
}
FROM=$(date -u -d "$(echo "$T0" | sed 's/^\(.*\) \(..\)\(..\)\(..\)$/\1 \2:\3:\4/')" '+%Y-%m-%d %H%M')
TO=$(date -u -d '+1 min' '+%Y-%m-%d %H%M')
DUR="{start: \"$FROM\", end: \"$TO\", step: MINUTE}"
echo
echo "waiting for the OAP to analyse and store the trace (it persists every 5 s) ..."
TID=""
for _ in $(seq 60); do
    TID=$(gql "{ queryBasicTraces(condition: {traceState: ALL, queryDuration: {start: \"$T0\",
        end: \"$(date -u -d '+1 min' '+%Y-%m-%d %H%M%S')\", step: SECOND},
        queryOrder: BY_START_TIME, paging: {pageNum: 1, pageSize: 20}}) { traces { traceIds } } }" |
        jq -r '.data.queryBasicTraces.traces[0].traceIds[0] // empty')
    if [ -n "$TID" ] && [ "$(gql "{ queryTrace(traceId: \"$TID\") { spans { spanId } } }" |
        jq '.data.queryTrace.spans | length')" -ge 4 ]; then
        break
    fi
    sleep 1
done
[ -n "$TID" ] || { echo "the OAP shows no trace after 60 s (log: scripts/oap.sh status)" >&2; exit 1; }
echo
echo "\$ OAP GraphQL: queryTrace(traceId: \"$TID\")"
gql "{ queryTrace(traceId: \"$TID\") { spans { segmentId spanId parentSpanId serviceCode endpointName
    type peer isError startTime endTime refs { parentSegmentId parentSpanId } } } }" | jq -r '
    .data.queryTrace.spans as $s
    | def kids($p): [$s[] | select((.segmentId == $p.segmentId and .parentSpanId == $p.spanId)
        or any(.refs[]; .parentSegmentId == $p.segmentId and .parentSpanId == $p.spanId))];
      def show($sp; $d): ("   " * $d) + (if $d > 0 then "└─ " else "" end)
        + "\($sp.serviceCode)  \($sp.endpointName)  \($sp.type)  peer=\($sp.peer)  "
        + "\($sp.endTime - $sp.startTime) ms" + (if $sp.isError then "  error" else "" end),
        (kids($sp)[] | show(.; $d + 1));
      $s[] | select(.parentSpanId == -1 and .refs == []) | show(.; 0)'
echo
echo "\$ OAP GraphQL: getGlobalTopology"
# Until the OAP's cache of peer addresses (refreshed every few seconds) knows that nginx's and
# python's addresses are those services, the callers' exit spans show as calls to conjectured
# nodes "127.0.0.1:port"; the topology is shown once every node is a real service.
TOPO=""
for _ in $(seq 60); do
    TOPO=$(gql "{ getGlobalTopology(duration: $DUR) { nodes { id name } calls { source target } } }" |
        jq -r '.data.getGlobalTopology as $t | ([$t.nodes[] | {(.id): .name}] | add) as $n
            | $t.calls[] | "\($n[.source]) -> \($n[.target])"')
    [ "$(printf '%s' "$TOPO" | grep -c .)" -ge 2 ] &&
        ! grep -q -E -e '-> [0-9.]+:[0-9]+$' <<<"$TOPO" && break
    sleep 1
done
echo "${TOPO:-(no calls yet)}"
echo
echo "\$ OAP GraphQL: listServices"
for _ in $(seq 30); do
    SVCS=$(gql '{ listServices { name layers } }' |
        jq -r '.data.listServices[] | "\(.name)  layer \(.layers | join(","))"')
    [ "$(printf '%s' "$SVCS" | grep -c .)" -ge 2 ] && break
    sleep 1
done
echo "$SVCS"
echo "(curl-client serves nothing: the OAP lists services that have entry spans; curl is a node"
echo "of the topology.)"
echo
echo "The OAP keeps running: GraphQL at http://127.0.0.1:$OAP_HTTP/graphql, agents' gRPC at"
echo "127.0.0.1:$OAP_GRPC. A SkyWalking UI 10.1.0 shows this data when pointed at"
echo "http://127.0.0.1:$OAP_HTTP (its SW_OAP_ADDRESS; the UI is not on Maven Central, see"
echo "docs/oap.md). Stop the OAP with: scripts/oap.sh stop"
