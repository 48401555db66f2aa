#!/usr/bin/env bash
# memcached.sh - memcached (untraced) with text-protocol clients traced (pymemcache and a raw
# socket pipeline with noreply, multi-get, a meta command and an unknown command): replies
# byte-equal to an untraced run; one exit span per command (component 20, layer Cache,
# cache.type Memcached, cache.cmd/key/op), errors (ERROR, CLIENT_ERROR) marked.
E2E_NAME=db_memcached
. "$E2E_DIR/lib.sh"
. "$DB_DIR/dblib.sh"
need jq
PY3=/usr/bin/python3 # Debian's, with python3-pymemcache
e2e_init
start_stub
start_memcached
$PY3 "$DB_DIR/memcached_client.py" "$MP" >"$T/mc.plain" 2>&1 || fail "memcached_client.py failed: $(cat "$T/mc.plain")"
traced db-mc $PY3 "$DB_DIR/memcached_client.py" "$MP" >"$T/mc.traced" 2>&1 ||
    fail "traced memcached_client.py failed: $(tail -n 5 "$T/mc.traced")"
cmp "$T/mc.plain" "$T/mc.traced" || fail "memcached replies changed under the agent"
N=$(sed -n 's/^COMMANDS //p' "$T/mc.traced")
wait_for "[ \$(jq -s '[.[].spans[] | select(.componentId == 20)] | length' '$T/seg.json') -ge $N ]" 30 ||
    fail "memcached spans: $(jq -s '[.[].spans[] | select(.componentId == 20)] | length' "$T/seg.json") of $N"
sleep 1.5
T_END=$(now_ms)
check "$DBDEFS"' dbspans(20) | length == '"$N" "one span per command ($N)"
check "$DBDEFS$JQDEFS"' all(dbspans(20)[]; .spanLayer == "Cache" and .spanType == "Exit"
    and tag("cache.type") == "Memcached" and .peer == "127.0.0.1:'"$MP"'" and sane_times
    and tag("cache.cmd") == (.operationName | ltrimstr("Memcached/")))' "layer, type, peer, cmd"
check "$DBDEFS$JQDEFS"' [dbspans(20)[] | select(.operationName == "Memcached/get" and tag("cache.key") == "k1")]
    | length >= 1 and all(tag("cache.op") == "read")' "get k1: key and op read"
check "$DBDEFS$JQDEFS"' [dbspans(20)[] | select(.operationName == "Memcached/set")] | length >= 4
    and all(tag("cache.op") == "write")' "set: op write"
check "$DBDEFS$JQDEFS"' [dbspans(20)[] | select(.isError) | .operationName] | sort == ["Memcached/bogus", "Memcached/incr"]' \
    "errors: the unknown command and incr of a non-number"
echo "ok db_memcached ($N commands)"
