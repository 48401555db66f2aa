#!/usr/bin/env bash
# badinput.sh - a fake Redis (tests/db/badinput_server.py) that closes half-way through a reply
# or answers bytes that are not RESP, and a real PostgreSQL given a 1 MB statement: the clients
# (traced) get exactly the bytes they get untraced; the spans end as errors saying why (the
# server closed before the reply; the stream could not be followed), a connection given up on
# is counted in `swagent status` (given_up) and logged, at most a line a second, and the 1 MB
# statement's db.statement is cut to 2048 bytes and "...".
E2E_NAME=db_badinput
. "$E2E_DIR/lib.sh"
. "$DB_DIR/dblib.sh"
need jq
PY3=/usr/bin/python3
e2e_init
start_stub
$PY3 "$DB_DIR/badinput_server.py" "$T/fake.port" >"$T/fake.out" 2>&1 &
PIDS="$PIDS $!"
wait_for "[ -s '$T/fake.port' ]" 10 || fail "fake server did not start"
FP=$(cat "$T/fake.port")
for k in cut garbage ok; do
    $PY3 "$DB_DIR/badinput_client.py" "$FP" $k >"$T/$k.plain" 2>&1 || fail "client $k"
    traced db-bad $PY3 "$DB_DIR/badinput_client.py" "$FP" $k >"$T/$k.traced" 2>&1 || fail "traced client $k"
    cmp "$T/$k.plain" "$T/$k.traced" || fail "bytes of '$k' changed under the agent"
done
# Giving up: one process whose Redis connections get bytes that are not RESP, four times (three
# at once, the fourth 1.2 s later): `swagent status` counts given_up=4 for it while it runs, and
# its log says so at most once a second: two lines, the second telling of the two not logged.
env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=db-bad-giveup $PY3 "$DB_DIR/badinput_client.py" "$FP" \
    garbage2 4 "$T/release" >"$T/giveup.out" 2>&1 &
GPID=$!
PIDS="$PIDS $GPID"
wait_for "[ \$(grep -c HTTP '$T/giveup.out') -ge 4 ]" 20 || fail "the give-up client: $(cat "$T/giveup.out")"
"$SWAGENT_CLI" status --runtime-dir "$T/run" >"$T/status.out" 2>&1 || fail "swagent status failed"
grep "pid $GPID live .*service=db-bad-giveup " "$T/status.out" | grep -q ' given_up=4$' ||
    fail "swagent status: no given_up=4 for pid $GPID: $(cat "$T/status.out")"
touch "$T/release"
wait "$GPID" || fail "the give-up client failed"
glog=$(grep -h "WARN swagent\[$GPID\]: redis: 127.0.0.1:$FP: .*connection no longer followed" "$T"/run/*.log)
[ "$(printf '%s\n' "$glog" | grep -c .)" = 2 ] || fail "give-up log lines: $glog"
printf '%s\n' "$glog" | head -1 | grep -q ': a reply that is not RESP: connection no longer followed.*; 0 more since the last such line' &&
    printf '%s\n' "$glog" | tail -1 | grep -q '; 2 more since the last such line' ||
    fail "give-up log lines (rate limit): $glog"

# PostgreSQL and memcached servers (tests/db/badproto_server.py) that close half-way through a
# reply or answer bytes that are not their protocol, to psql and a text-protocol client.
for m in pg-cut pg-garbage mc-cut mc-garbage; do
    $PY3 "$DB_DIR/badproto_server.py" "$m" "$T/$m.port" >"$T/$m.out" 2>&1 &
    PIDS="$PIDS $!"
    wait_for "[ -s '$T/$m.port' ]" 10 || fail "$m did not start"
    port=$(cat "$T/$m.port")
    for run in plain traced; do
        pre=()
        [ $run = traced ] && pre=(env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME="db-bad-$m")
        case $m in
        pg-*) "${pre[@]}" psql -X -q -At -h 127.0.0.1 -p "$port" -U postgres -d fake \
            -c "SELECT '$m'" >"$T/$m.$run" 2>&1 ;;
        mc-*) "${pre[@]}" $PY3 "$DB_DIR/badinput_client.py" "$port" mc:k >"$T/$m.$run" 2>&1 ;;
        esac
    done
    cmp "$T/$m.plain" "$T/$m.traced" || fail "$m: output changed under the agent"
    eval "PORT_${m//-/_}=$port"
done
grep -q 'server closed the connection unexpectedly' "$T/pg-cut.plain" &&
    grep -q 'lost synchronization with server' "$T/pg-garbage.plain" &&
    grep -q "VALUE k 0 10\\\\r\\\\nabc'" "$T/mc-cut.plain" && grep -q 'HTTP/1.1' "$T/mc-garbage.plain" ||
    fail "the fake servers: $(cat "$T"/pg-*.plain "$T"/mc-*.plain)"

start_pg
big=$($PY3 -c "print('SELECT length(\'' + 'x' * 1000000 + '\')')")
echo "$big" >"$T/big.sql"
psql -X -q -At -h 127.0.0.1 -p "$PGP" -U postgres -d postgres -f "$T/big.sql" >"$T/big.plain" 2>&1
traced db-bad-pg psql -X -q -At -h 127.0.0.1 -p "$PGP" -U postgres -d postgres -f "$T/big.sql" \
    >"$T/big.traced" 2>&1
cmp "$T/big.plain" "$T/big.traced" || fail "psql's answer to the 1 MB statement changed"
[ "$(cat "$T/big.traced")" = 1000000 ] || fail "psql: $(head -c 200 "$T/big.traced")"
wait_for "[ \$(jq -s '[.[].spans[] | select(.componentId == 7 or .componentId == 22)] | length' '$T/seg.json') -ge 4 ]" 20 ||
    fail "spans did not arrive"
sleep 1.5
T_END=$(now_ms)
msg='.logs[0].data | map(select(.key == "message"))[0].value'
check "$DBDEFS$JQDEFS"' [dbspans(7)[] | select(tag("cache.key") == "cut")] | length == 1
    and all(.isError and ('"$msg"' | test("closed")))' "a reply cut by the server: an error span"
check "$DBDEFS$JQDEFS"' [dbspans(7)[] | select(tag("cache.key") == "garbage")] | length == 1
    and all(.isError and ('"$msg"' | test("not RESP")))' "a reply that is not RESP: an error span, not followed"
check "$DBDEFS$JQDEFS"' [dbspans(7)[] | select(tag("cache.key") == "ok")] | length == 1 and all(.isError | not)' \
    "the good reply: a good span"
check "$DBDEFS$JQDEFS"' [dbspans(22)[] | select(.peer == "127.0.0.1:'"$PORT_pg_cut"'")] | length == 1
    and all(.isError and tag("db.statement") == "SELECT '"'"'pg-cut'"'"'" and ('"$msg"' | test("closed")))' \
    "PostgreSQL: a reply cut by the server: an error span"
check "$DBDEFS$JQDEFS"' [dbspans(22)[] | select(.peer == "127.0.0.1:'"$PORT_pg_garbage"'")] | length == 1
    and all(.isError and ('"$msg"' | test("postgresql: ")))' "PostgreSQL: a reply that is not the protocol: an error span"
check "$DBDEFS$JQDEFS"' [dbspans(20)[] | select(.peer == "127.0.0.1:'"$PORT_mc_cut"'")] | length == 1
    and all(.isError and tag("cache.key") == "k" and ('"$msg"' | test("closed")))' \
    "memcached: a reply cut by the server: an error span"
check "$DBDEFS$JQDEFS"' [dbspans(20)[] | select(.peer == "127.0.0.1:'"$PORT_mc_garbage"'")] | length == 1
    and all(.isError and ('"$msg"' | test("unexpected line")))' "memcached: a reply that is not the protocol: an error span"
for m in pg-garbage mc-garbage; do
    p=$(cat "$T/$m.port")
    grep -hq "WARN swagent\[[0-9]*\]: \(postgresql\|memcached\): 127.0.0.1:$p: .*connection no longer followed" \
        "$T"/run/*.log || fail "$m: no give-up log line"
done
check "$DBDEFS$JQDEFS"' [dbspans(22)[] | select(tag("db.statement") | startswith("SELECT length("))]
    | length == 1 and all((tag("db.statement") | length) == 2051 and (tag("db.statement") | endswith("xx...")))' \
    "the 1 MB statement: db.statement cut to 2048 bytes and ..."
echo "ok db_badinput"
