#!/usr/bin/env bash
# postgresql.sh - PostgreSQL 15 (untraced, initdb in a temp dir, run as the postgres user) with
# psql, pgbench (simple, extended and prepared protocols) and python3-psycopg2 traced, over TCP
# and the Unix socket: every result the clients get is the same as untraced (COPY in and out
# included); statements in spans (component 22, layer Database, db.type, db.instance,
# db.statement), errors marked with their SQLSTATE; pgbench's statements all accounted for.
E2E_NAME=db_postgresql
. "$E2E_DIR/lib.sh"
. "$DB_DIR/dblib.sh"
need jq "$PG_BIN/pgbench" psql
PY3=/usr/bin/python3 # Debian's, with python3-psycopg2
e2e_init
start_stub
start_pg
PSQL="psql -X -q -h 127.0.0.1 -p $PGP -U postgres"
for d in plain traced sock; do $PSQL -d postgres -c "CREATE DATABASE $d" >/dev/null || fail "createdb $d"; done

# 1. psql: a script with DDL, DML, an error, COPY in and out (ON_ERROR_STOP off).
cat >"$T/script.sql" <<'SQL'
CREATE TABLE t (a int, b text);
INSERT INTO t VALUES (1, 'one'), (2, 'two');
SELECT * FROM t ORDER BY a;
SELECT * FROM missing_table;
COPY t FROM STDIN;
3	three
4	four
\.
COPY t TO STDOUT;
SELECT count(*), sum(a) FROM t;
BEGIN; UPDATE t SET b = 'x' WHERE a = 1; COMMIT;
\copy t to stdout
SQL
$PSQL -d plain -f "$T/script.sql" >"$T/psql.plain" 2>&1
traced db-pg-psql $PSQL -d traced -f "$T/script.sql" >"$T/psql.traced" 2>&1
traced db-pg-psql psql -X -q -h "$PGSOCK" -p "$PGP" -U postgres -d sock -f "$T/script.sql" \
    >"$T/psql.sock" 2>&1
cmp "$T/psql.plain" "$T/psql.traced" || fail "psql output changed under the agent (TCP)"
cmp "$T/psql.plain" "$T/psql.sock" || fail "psql output changed under the agent (socket)"
grep -q 'missing_table' "$T/psql.plain" || fail "the error was not reported: $(cat "$T/psql.plain")"

# 2. python3-psycopg2.
$PY3 "$DB_DIR/pg_client.py" 127.0.0.1 "$PGP" plain >"$T/py.plain" 2>&1 || fail "pg_client.py failed: $(cat "$T/py.plain")"
traced db-pg-py $PY3 "$DB_DIR/pg_client.py" 127.0.0.1 "$PGP" traced >"$T/py.traced" 2>&1 ||
    fail "traced pg_client.py failed: $(tail -n 5 "$T/py.traced")"
cmp "$T/py.plain" "$T/py.traced" || fail "psycopg2 results changed under the agent"

# 3. pgbench -S: simple, extended and prepared protocols, N transactions each.
N=200
"$PG_BIN/pgbench" -h 127.0.0.1 -p "$PGP" -U postgres -i -s 1 -q plain >"$T/pgbench-init.out" 2>&1 ||
    fail "pgbench -i failed"
for m in simple extended prepared; do
    traced "db-pg-bench-$m" "$PG_BIN/pgbench" -h 127.0.0.1 -p "$PGP" -U postgres -S -M "$m" -t "$N" \
        -c 1 plain >"$T/pgbench-$m.out" 2>&1 || fail "pgbench -M $m failed: $(tail -n 5 "$T/pgbench-$m.out")"
    grep -q "number of transactions actually processed: $N/$N" "$T/pgbench-$m.out" ||
        fail "pgbench -M $m: $(cat "$T/pgbench-$m.out")"
done

SEL='SELECT abalance FROM pgbench_accounts WHERE aid = '
cnt() { jq -s "[.[] | select(.service == \"$1\") | .spans[] | select(.componentId == 22 and
    (.tags | map(select(.key == \"db.statement\"))[0].value // \"\" | startswith(\"$SEL\")))] | length" "$T/seg.json"; }
wait_for "[ \$(cnt db-pg-bench-prepared) -ge $N ]" 30 || fail "pgbench -M prepared: $(cnt db-pg-bench-prepared) of $N SELECT spans"
sleep 1.5
T_END=$(now_ms)
for m in simple extended prepared; do
    [ "$(cnt "db-pg-bench-$m")" = "$N" ] || fail "pgbench -M $m: $(cnt "db-pg-bench-$m") SELECT spans, $N sent"
done
check "$DBDEFS$JQDEFS"' [$s[] | select(.service == "db-pg-bench-simple") | .spans[] | select(tag("db.statement") | startswith("'"$SEL"'"))]
    | all(.operationName == "PostgreSQL/Query")' "simple protocol: PostgreSQL/Query spans"
check "$DBDEFS$JQDEFS"' [$s[] | select(.service == "db-pg-bench-prepared") | .spans[] | select(tag("db.statement") | startswith("'"$SEL"'"))]
    | all(.operationName == "PostgreSQL/Execute" and tag("db.statement") == "'"$SEL"'$1;")' \
    "prepared protocol: PostgreSQL/Execute spans with the prepared statement's text"
check "$DBDEFS$JQDEFS"' all(dbspans(22)[]; .spanLayer == "Database" and .spanType == "Exit"
    and tag("db.type") == "PostgreSQL" and sane_times)' "PostgreSQL spans: layer, type, times"
check "$DBDEFS$JQDEFS"' [$s[] | select(.service == "db-pg-psql") | .spans[] | select(.componentId == 22
    and .peer == "127.0.0.1:'"$PGP"'")] | length > 0 and all(tag("db.instance") == "traced")' \
    "psql over TCP: peer 127.0.0.1:port, db.instance traced"
check "$DBDEFS$JQDEFS"' [dbspans(22)[] | select(.peer == "127.0.0.1:'"$PGP"'" and (tag("db.statement") | test("missing_table|no_such_table")))]
    | length == 2 and all(.isError and (.logs[0].data | map(select(.key == "message"))[0].value
    | startswith("SQLSTATE 42P01")))' "errors marked with SQLSTATE 42P01 (psql, psycopg2)"
check "$DBDEFS$JQDEFS"' [dbspans(22)[] | select(.isError)] | all(tag("db.statement") | test("missing_table|no_such_table"))' \
    "no other error span"
check "$DBDEFS$JQDEFS"' [dbspans(22)[] | select(tag("db.statement") | startswith("COPY t FROM STDIN"))]
    | length >= 1 and all(.isError | not)' "COPY FROM STDIN spans end well"
check "$DBDEFS$JQDEFS"' [$s[] | select(.service == "db-pg-psql") | .spans[] | select(.componentId == 22
    and .peer == "unix:'"$PGSOCK"'/.s.PGSQL.'"$PGP"'")] | length > 0 and all(tag("db.instance") == "sock")
    and (map(select(.isError)) | length == 1)' "psql over the Unix socket: peer the socket path, db.instance sock, its error"
echo "ok db_postgresql"
