#!/usr/bin/env bash
# modconf.sh - the protocol modules' configuration (docs/configuration.md, "Protocol modules")
# with real servers and clients: redis-server + redis-cli, PostgreSQL + psql and pgbench -M
# prepared, memcached + a text-protocol client, MariaDB + the mariadb client and PHP's PDO
# (server-side prepared statements). Every client's output is compared with an untraced run.
#   1. agent.cluster: every database and cache exit's peer is `<cluster>/<peer>` (as HTTP exits'),
#      over TCP and over Unix sockets.
#   2. The SQL keys are plugin.jdbc.* for every SQL module: sql_body_max_length cuts PostgreSQL
#      and MySQL statements alike, trace_sql_parameters gives both db.sql.parameters, cut to
#      sql_parameters_max_length; the old plugin.mysql.* names change nothing and are logged.
#   3. swagent.trace_<module>=false: no span of that module, the same output.
E2E_NAME=db_modconf
. "$E2E_DIR/lib.sh"
. "$DB_DIR/dblib.sh"
. "$E2E_DIR/lemp_lib.sh"
need jq redis-cli psql "$PG_BIN/pgbench" php
need_lemp_tools mariadb mariadb-install-db mariadbd
PY3=/usr/bin/python3
e2e_init
start_stub
start_redis
start_pg
start_memcached
start_mariadb

MC_PY='import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"set mk 0 0 2\r\nhi\r\nget mk\r\n")
out = b""
while not out.endswith(b"END\r\n"):
    d = s.recv(4096)
    if not d:
        break
    out += d
print(repr(out))'
cat >"$T/pdo.php" <<PHP
<?php
\$db = new PDO('mysql:unix_socket=$DB_SOCK;dbname=shop', 'app', 'apppw',
    [PDO::ATTR_EMULATE_PREPARES => false, PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]);
\$st = \$db->prepare('SELECT name, price FROM items WHERE id = ? OR name = ?');
\$st->execute([1, 'plum-and-a-long-tail']);
echo json_encode(\$st->fetchAll(PDO::FETCH_NUM)), "\n";
PHP
# clients SUFFIX [env...]: each client once (traced when env is given: LD_PRELOAD and settings),
# output in $T/<client>.SUFFIX; services db-mc-<client>-SUFFIX.
clients() {
    local sfx=$1 pre=()
    shift
    [ $# -gt 0 ] && pre=(env LD_PRELOAD="$SWAGENT_LIB" "$@")
    printf 'SET ck v\nGET ck\n' | SW_AGENT_NAME="db-mc-redis-$sfx" "${pre[@]}" redis-cli -p "$RP" \
        >"$T/redis.$sfx" 2>&1 || fail "redis-cli ($sfx)"
    printf 'GET ck\n' | SW_AGENT_NAME="db-mc-redis-$sfx" "${pre[@]}" redis-cli -s "$RSOCK" \
        >>"$T/redis.$sfx" 2>&1 || fail "redis-cli socket ($sfx)"
    SW_AGENT_NAME="db-mc-psql-$sfx" "${pre[@]}" psql -X -q -At -h 127.0.0.1 -p "$PGP" -U postgres \
        -d postgres -c "SELECT 'a-statement-longer-than-sixteen-bytes'" >"$T/psql.$sfx" 2>&1 ||
        fail "psql ($sfx)"
    SW_AGENT_NAME="db-mc-psql-$sfx" "${pre[@]}" psql -X -q -At -h "$PGSOCK" -p "$PGP" -U postgres \
        -d postgres -c "SELECT 2" >>"$T/psql.$sfx" 2>&1 || fail "psql socket ($sfx)"
    SW_AGENT_NAME="db-mc-pgbench-$sfx" "${pre[@]}" "$PG_BIN/pgbench" -h 127.0.0.1 -p "$PGP" \
        -U postgres -S -M prepared -t 3 -c 1 postgres >"$T/pgbench.$sfx" 2>&1 ||
        fail "pgbench ($sfx): $(tail -n 3 "$T/pgbench.$sfx")"
    grep -q 'processed: 3/3' "$T/pgbench.$sfx" || fail "pgbench ($sfx): $(cat "$T/pgbench.$sfx")"
    sed -i '/^\(latency\|initial connection\|tps\)/d' "$T/pgbench.$sfx"
    SW_AGENT_NAME="db-mc-mc-$sfx" "${pre[@]}" $PY3 -c "$MC_PY" "$MP" >"$T/mc.$sfx" 2>&1 ||
        fail "memcached client ($sfx)"
    SW_AGENT_NAME="db-mc-mysql-$sfx" "${pre[@]}" mariadb --no-defaults -h 127.0.0.1 -P "$DB_PORT" \
        -u app -papppw shop -e 'SELECT COUNT(*) FROM items' >"$T/mysql.$sfx" 2>&1 || fail "mariadb ($sfx)"
    SW_AGENT_NAME="db-mc-mysql-$sfx" "${pre[@]}" mariadb --no-defaults -S "$DB_SOCK" \
        -u app -papppw shop -e 'SELECT 1' >>"$T/mysql.$sfx" 2>&1 || fail "mariadb socket ($sfx)"
    SW_AGENT_NAME="db-mc-pdo-$sfx" "${pre[@]}" php "$T/pdo.php" >"$T/pdo.$sfx" 2>&1 || fail "pdo ($sfx)"
}
same() { # SUFFIX: every client printed what it prints untraced
    local c
    for c in redis psql pgbench mc mysql pdo; do
        cmp -s "$T/$c.bare" "$T/$c.$1" || fail "$c output differs ($1): $(diff "$T/$c.bare" "$T/$c.$1" | head -5)"
    done
}
"$PG_BIN/pgbench" -i -s 1 -q -h 127.0.0.1 -p "$PGP" -U postgres postgres >"$T/pgbench-init.out" 2>&1 ||
    fail "pgbench -i: $(tail -n 3 "$T/pgbench-init.out")"
clients bare
grep -q '^3$' "$T/mysql.bare" && grep -q 'apple' "$T/pdo.bare" && grep -q 'VALUE mk 0 2' "$T/mc.bare" ||
    fail "the clients' output: $(cat "$T/mysql.bare" "$T/pdo.bare" "$T/mc.bare")"

# 1 and 2 in one traced run: agent.cluster, the plugin.jdbc.* keys from the environment, and the
# old plugin.mysql.* names in the file (they must change nothing).
write_config 'plugin.mysql.sql_body_max_length=2048' 'plugin.mysql.trace_sql_parameters=false' \
    'plugin.mysql.sql_parameters_max_length=512'
clients cfg SW_AGENT_CLUSTER=c1 SW_PLUGIN_JDBC_SQL_BODY_MAX_LENGTH=16 SW_JDBC_TRACE_SQL_PARAMETERS=true \
    SW_PLUGIN_JDBC_SQL_PARAMETERS_MAX_LENGTH=12
same cfg
# 3: each module switched off (the file, as a user would), the others on.
write_config 'swagent.trace_redis=false' 'swagent.trace_postgresql=false' \
    'swagent.trace_memcached=false' 'swagent.trace_mysql=false'
clients off SW_AGENT_CLUSTER=c1
same off

# Spans: 2 Redis commands (SET, GET) + 1 over the socket, 2 psql statements, pgbench's 3 SELECTs
# (and its SETs/BEGINs..., counted from the server side below as >= 3), memcached set + get,
# 2 mariadb client queries, PDO's Prepare + Execute.
wait_for "[ \$(jq -s '[.[].spans[] | select(.componentId == 5)] | length' '$T/seg.json') -ge 4 ]" 30 ||
    fail "MySQL spans did not arrive"
sleep 2
T_END=$(now_ms)
# All spans come from the cfg run: the switched-off run made none (its services are absent).
check "$JQDEFS"' [$s[] | select(.service | test("-off"))] | length == 0' "switched off: no spans at all"
check "$JQDEFS"' [$s[] | select(.service | endswith("||c1") | not)] | length == 0' "services name|namespace|cluster"
check "$DBDEFS$JQDEFS"' [7, 22, 20, 5] | all(. as $c | dbspans($c) | length > 0)' "spans of all four modules"
check "$DBDEFS$JQDEFS"' [dbspans(22)[] | tag("db.statement") | select(startswith("SELECT '"'"'a-st"))]
    == ["SELECT '"'"'a-statem..."]' "PostgreSQL statement cut to plugin.jdbc.sql_body_max_length (16)"
check "$DBDEFS$JQDEFS"' [dbspans(5)[] | select(.operationName == "Mysql/Query") | tag("db.statement")]
    | (map(select(. == "SELECT 1" or . == "SELECT COUNT(*) ...")) | length) == 2 and all(length <= 19)
    and ([dbspans(5)[] | select(.operationName == "Mysql/Execute") | tag("db.statement")]
        == ["SELECT name, pri..."])' "MySQL statements cut to plugin.jdbc.sql_body_max_length (16)"
check "$DBDEFS$JQDEFS"' [dbspans(5)[] | select(.operationName == "Mysql/Execute") | tag("db.sql.parameters")]
    == ["[1,plum-and-..."]' "MySQL: plugin.jdbc.trace_sql_parameters, cut to sql_parameters_max_length (12)"
check "$DBDEFS$JQDEFS"' [$s[] | select(.service | startswith("db-mc-pgbench")) | .spans[]
    | select(.operationName == "PostgreSQL/Execute" and (tag("db.statement") | startswith("SELECT abalance")))]
    | length == 3 and all(tag("db.sql.parameters") | test("^\\[[0-9]+\\]$"))' \
    "PostgreSQL: plugin.jdbc.trace_sql_parameters on pgbench -M prepared's executions"
check "$DBDEFS$JQDEFS"' [dbspans(7)[], dbspans(22)[], dbspans(20)[], dbspans(5)[]] | all(.peer | startswith("c1/"))
    and ([dbspans(7)[].peer] | unique) == (["c1/127.0.0.1:'"$RP"'", "c1/unix:'"$RSOCK"'"] | sort)
    and ([dbspans(22)[].peer] | unique) == (["c1/127.0.0.1:'"$PGP"'", "c1/unix:'"$PGSOCK"'/.s.PGSQL.'"$PGP"'"] | sort)
    and ([dbspans(20)[].peer] | unique) == ["c1/127.0.0.1:'"$MP"'"]
    and ([dbspans(5)[].peer] | unique) == (["c1/127.0.0.1:'"$DB_PORT"'", "c1/unix:'"$DB_SOCK"'"] | sort)' \
    "agent.cluster: every DB and cache exit peer is c1/<peer> (TCP and Unix sockets)"
grep -q 'plugin.mysql.trace_sql_parameters is not supported by swagent.*plugin.jdbc.trace_sql_parameters' \
    "$T"/run/*.log || fail "no log line for the refused plugin.mysql.* key: $(grep -h config "$T"/run/*.log | head -5)"
echo "ok db_modconf (cluster peers, shared plugin.jdbc.* keys, per-module switches)"
