#!/usr/bin/env bash
# oap_datastores.sh - swagent's database and cache exit spans (issue 36) at a real SkyWalking
# OAP 10.1.0: the virtual database and virtual cache services the OAP makes of them, as the UI
# shows them. curl (traced, oap-ds-client) -> a python3 http.server (traced, oap-ds-app) whose
# handler calls redis-server (python3-redis: SET, GET) and PostgreSQL 15 (python3-psycopg2: a
# SELECT; /slow also a SELECT pg_sleep(0.3)), both untraced on loopback ports (tests/db/dblib.sh).
# Through GraphQL:
#   - listServices(layer: VIRTUAL_CACHE) is exactly the Redis peer 127.0.0.1:<redis port>, and
#     VIRTUAL_DATABASE exactly the PostgreSQL peer 127.0.0.1:<pg port> (the OAP's
#     VirtualCacheProcessor: layer Cache and cache.type; VirtualDatabaseProcessor: layer
#     Database; the peer names the service);
#   - getGlobalTopology: the app's calls to both, seen from the client side, their nodes not
#     real and typed Redis and PostgreSQL (component ids 7 and 22), besides curl -> app;
#   - the virtual services' dashboard metrics (MQE, scripts/oap/config/oal/core.oal):
#     database_access_cpm/resp_time/sla of the database, cache_read/write_cpm/resp_time of the
#     cache have values; the calls add up: 3 writes (SET) and 3 reads (GET) of the cache, 4
#     statements, SLA 100 %;
#   - the slow statement (top_n_database_statement): the pg_sleep SELECT, >= 300 ms;
#   - a trace: the app's Redis/SET, Redis/GET and PostgreSQL/Query exits with their layers,
#     components (named by scripts/oap/config/component-libraries.yml) and peers;
#   - no WARN or ERROR in the OAP's log while it took them.
E2E_NAME=oap_datastores
. "$E2E_DIR/lib.sh"
. "$OAP_DIR/lib_oap.sh"
. "$DB_DIR/dblib.sh"
PY3=/usr/bin/python3 # Debian's, with python3-redis and python3-psycopg2
e2e_init
# The servers start while the OAP does.
oap_prepare
oap_launch
start_redis
start_pg
oap_ready

cat >"$T/app.py" <<'PY'
import http.server, sys
import psycopg2, redis
rp, pgp = int(sys.argv[1]), int(sys.argv[2])
r = redis.Redis(host="127.0.0.1", port=rp)
pg = psycopg2.connect(host="127.0.0.1", port=pgp, dbname="postgres", user="postgres")
pg.autocommit = True
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        r.set("order:" + self.path, "pending")
        v = r.get("order:" + self.path)
        cur = pg.cursor()
        cur.execute("SELECT count(*) FROM pg_class WHERE relname LIKE %s", ("pg_%",))
        n = cur.fetchone()[0]
        if self.path == "/slow":
            cur.execute("SELECT pg_sleep(0.3)")
            cur.fetchone()
        body = b"%s %d\n" % (v, n)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print("PORT %d" % s.server_address[1], flush=True)
s.serve_forever()
PY
start_server app traced oap-ds-app $PY3 -u "$T/app.py" "$RP" "$PGP"
APP=$PORT
for p in /orders/1 /orders/2 /slow; do
    out=$(traced oap-ds-client curl -sS "http://127.0.0.1:$APP$p") || fail "GET $p failed"
    [[ $out == "pending "* ]] || fail "GET $p answered: $out"
done
RPEER=127.0.0.1:$RP
PGPEER=127.0.0.1:$PGP
echo "redis $RPEER, postgresql $PGPEER"

DM=$(oap_duration MINUTE)
gql_until '{ c: listServices(layer: "VIRTUAL_CACHE") { name layers } d: listServices(layer: "VIRTUAL_DATABASE") { name layers } }' \
    '(.c | length) > 0 and (.d | length) > 0' 60 "the virtual cache and database services listed"
echo "VIRTUAL_CACHE: $(jq -c .c <<<"$GQL"); VIRTUAL_DATABASE: $(jq -c .d <<<"$GQL")"
expect "[.c[].name] == [\"$RPEER\"] and .c[0].layers == [\"VIRTUAL_CACHE\"]" \
    "the one virtual cache is redis-server, by its peer address"
expect "[.d[].name] == [\"$PGPEER\"] and .d[0].layers == [\"VIRTUAL_DATABASE\"]" \
    "the one virtual database is PostgreSQL, by its peer address"

# The topology: curl -> app, app -> redis and app -> postgresql (the client side: the servers
# are not traced), the datastores' nodes virtual and typed by the exits' components.
Q="{ getGlobalTopology(duration: $DM) { nodes { id name type isReal }
    calls { source target detectPoints } } }"
COND="(.getGlobalTopology.nodes | map(.name) | sort) == ([\"oap-ds-client\", \"oap-ds-app\", \"$RPEER\", \"$PGPEER\"] | sort)"
gql_until "$Q" "$COND" 60 "the topology's nodes: client, app, redis, postgresql"
TOPO=$GQL
echo "topology: $(jq -c '.getGlobalTopology' <<<"$TOPO")"
expect "[.getGlobalTopology.nodes[] | select(.name == \"$RPEER\")][0] | .type == \"Redis\" and .isReal == false" \
    "redis is a virtual node of type Redis"
expect "[.getGlobalTopology.nodes[] | select(.name == \"$PGPEER\")][0] | .type == \"PostgreSQL\" and .isReal == false" \
    "postgresql is a virtual node of type PostgreSQL"
expect '[.getGlobalTopology.nodes[] | select(.name == "oap-ds-app")][0].isReal' "the app is a real service"
edges=$(jq -r '(.getGlobalTopology.nodes | map({(.id): .name}) | add) as $n
    | [.getGlobalTopology.calls[] | "\($n[.source])->\($n[.target]):\(.detectPoints | sort | join(","))"] | .[]' <<<"$TOPO" | LC_ALL=C sort | paste -sd' ')
want=$(printf '%s\n' "oap-ds-app->$PGPEER:CLIENT" "oap-ds-app->$RPEER:CLIENT" \
    "oap-ds-client->oap-ds-app:CLIENT,SERVER" | LC_ALL=C sort | paste -sd' ')
[ "$edges" = "$want" ] || oap_fail OAP "topology calls: $edges, want $want"

# The virtual services' dashboards (MQE, entity: the virtual service, not normal).
for m in "database_access_cpm database_access_resp_time database_access_sla|$PGPEER" \
    "cache_read_cpm cache_write_cpm cache_read_resp_time cache_write_resp_time|$RPEER"; do
    for e in ${m%%|*}; do
        gql_until "{ execExpression(expression: \"$e\", entity: {serviceName: \"${m#*|}\", normal: false},
            duration: $DM) { error results { values { value } } } }" \
            '.execExpression.error == null and ([.execExpression.results[].values[] | .value // empty] | length) > 0' 60 \
            "$e of ${m#*|} has a value"
        echo "$e ${m#*|}: $(jq -c '[.execExpression.results[].values[] | .value // empty]' <<<"$GQL")"
    done
done
# 3 requests: 3 SETs (writes), 3 GETs (reads), 4 statements, all successful (SLA 100.00 %).
for pair in "cache_write_cpm|$RPEER|3" "cache_read_cpm|$RPEER|3" "database_access_cpm|$PGPEER|4"; do
    IFS='|' read -r e svc n <<<"$pair"
    gql_until "{ execExpression(expression: \"sum($e)\", entity: {serviceName: \"$svc\", normal: false},
        duration: $DM) { error results { values { value } } } }" \
        "[.execExpression.results[].values[] | .value // \"0\" | tonumber] | add == $n" 30 \
        "sum($e) of $svc adds up to the $n calls"
done
gql_until "{ execExpression(expression: \"database_access_sla\", entity: {serviceName: \"$PGPEER\", normal: false},
    duration: $DM) { results { values { value } } } }" \
    '[.execExpression.results[].values[] | .value // empty | tonumber] | length > 0 and all(. == 10000)' 30 \
    "database_access_sla 100 % (every statement succeeded)"

# The slow statement (over the OAP's default 200 ms for a database); the OAP writes them once a
# minute (topNReportPeriod).
gql_until "{ readRecords(condition: {name: \"top_n_database_statement\", topN: 10, order: DES,
    parentEntity: {scope: Service, serviceName: \"$PGPEER\", normal: false}}, duration: $DM)
    { name value refId } }" '.readRecords | length > 0' 90 "a slow statement of $PGPEER"
echo "slow statements: $(jq -c .readRecords <<<"$GQL")"
expect '.readRecords | length == 1 and (.[0].name | test("pg_sleep")) and (.[0].value | tonumber) >= 300' \
    "the one slow statement is the pg_sleep SELECT, >= 300 ms"

# One trace: the app's exits with their layers, components and peers.
gql_until "{ queryBasicTraces(condition: {queryDuration: $DM, traceState: ALL, queryOrder: BY_START_TIME,
    paging: {pageNum: 1, pageSize: 20}}) { traces { segmentId endpointNames traceIds } } }" \
    '[.queryBasicTraces.traces[] | select(.endpointNames | index("GET:/orders/1"))] | length > 0' 60 \
    "the trace of GET /orders/1"
TID=$(jq -r '[.queryBasicTraces.traces[] | select(.endpointNames | index("GET:/orders/1"))][0].traceIds[0]' <<<"$GQL")
GQL=$(gql "{ queryTrace(traceId: \"$TID\") { spans { serviceCode type layer component peer endpointName
    tags { key value } } } }")
echo "trace $TID: $(jq -c '[.queryTrace.spans[] | [.serviceCode, .type, .layer, .component, .peer, .endpointName]]' <<<"$GQL")"
expect "[.queryTrace.spans[] | select(.serviceCode == \"oap-ds-app\" and .type == \"Exit\")
    | [.endpointName, .layer, .component, .peer]] == [[\"Redis/SET\", \"Cache\", \"Redis\", \"$RPEER\"],
    [\"Redis/GET\", \"Cache\", \"Redis\", \"$RPEER\"], [\"PostgreSQL/Query\", \"Database\", \"PostgreSQL\", \"$PGPEER\"]]" \
    "the app's exits: Redis/SET, Redis/GET (Cache, Redis), then PostgreSQL/Query (Database)"
expect '[.queryTrace.spans[] | select(.layer == "Database") | .tags | from_entries]
    | all(."db.type" == "PostgreSQL" and (."db.statement" | test("pg_class")))' \
    "the PostgreSQL exits carry db.type and db.statement"
oap_log_check
echo "ok oap_datastores"
