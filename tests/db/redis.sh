#!/usr/bin/env bash
# redis.sh - redis-server (untraced) with redis-cli, python3-redis and redis-benchmark -P 16
# traced, over TCP and the Unix socket: every reply byte the clients get is the same as
# untraced; MONITOR and pub/sub keep working; and every command is accounted for: as many
# Redis exit spans as the server counted commands from the traced clients, each with component
# 7, layer Cache, cache.type/cmd/key/op tags, the peer, errors (-ERR) marked.
E2E_NAME=db_redis
. "$E2E_DIR/lib.sh"
. "$DB_DIR/dblib.sh"
need redis-benchmark jq
PY3=/usr/bin/python3 # Debian's, with python3-redis
e2e_init
start_stub
start_redis

stat() { redis-cli -p "$RP" info stats | tr -d '\r' | sed -n 's/^total_commands_processed://p'; }
CLI_CMDS='SET k v
GET k
INCR k
GET missing
DEL k
LPUSH l a b c
LRANGE l 0 -1
HSET h f1 v1 f2 v2
HGETALL h
MULTI
INCR n
INCR n
EXEC
SET "bin key" "x y"
GET "bin key"
PING'
N_CLI=$(printf '%s\n' "$CLI_CMDS" | wc -l)

# 1. redis-cli: replies unchanged (db 1 untraced, db 2 traced; same commands).
printf '%s\n' "$CLI_CMDS" | redis-cli -p "$RP" -n 1 >"$T/cli.plain" 2>&1 || fail "redis-cli failed"
before=$(stat)
printf '%s\n' "$CLI_CMDS" | traced db-redis-cli redis-cli -p "$RP" -n 2 >"$T/cli.traced" 2>&1 ||
    fail "traced redis-cli failed"
after=$(stat)
cmp "$T/cli.plain" "$T/cli.traced" || fail "redis-cli output changed under the agent"
# redis-cli sends SELECT 2 and COMMAND DOCS (or COMMAND) at start: the server's count is the
# truth; minus 1 for the first INFO.
CLI_N=$((after - before - 1))
[ "$CLI_N" -ge "$N_CLI" ] || fail "server counted $CLI_N commands, sent $N_CLI"

# 2. python3-redis over TCP and over the Unix socket.
$PY3 "$DB_DIR/redis_client.py" "$RP" 3 >"$T/py.plain" 2>&1 || fail "redis_client.py failed"
before=$(stat)
traced db-redis-py $PY3 "$DB_DIR/redis_client.py" "$RP" 4 >"$T/py.traced" 2>&1 ||
    fail "traced redis_client.py failed: $(tail -n 5 "$T/py.traced")"
after=$(stat)
PY_N=$((after - before - 1))
before=$(stat)
traced db-redis-sock $PY3 "$DB_DIR/redis_client.py" "$RSOCK" 5 >"$T/py.sock" 2>&1 ||
    fail "traced redis_client.py over the socket failed"
after=$(stat)
SOCK_N=$((after - before - 1))
cmp "$T/py.plain" "$T/py.traced" || fail "python3-redis replies changed under the agent (TCP)"
cmp "$T/py.plain" "$T/py.sock" || fail "python3-redis replies changed under the agent (socket)"

# 3. MONITOR and SUBSCRIBE under the agent keep working.
before=$(stat)
env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=db-redis-mon redis-cli -p "$RP" monitor \
    >"$T/monitor.out" 2>&1 &
MON=$!
PIDS="$PIDS $MON"
env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=db-redis-sub redis-cli -p "$RP" subscribe news \
    >"$T/sub.out" 2>&1 &
SUB=$!
PIDS="$PIDS $SUB"
wait_for "grep -q news '$T/sub.out'" 10 || fail "subscriber did not start"
wait_for "grep -q OK '$T/monitor.out'" 10 || fail "monitor did not start"
for i in 1 2 3; do
    redis-cli -p "$RP" publish news "m$i" >/dev/null
    redis-cli -p "$RP" set "mon$i" x >/dev/null
done
wait_for "grep -q m3 '$T/sub.out'" 10 || fail "subscriber missed messages: $(cat "$T/sub.out")"
wait_for "grep -q '\"mon3\"' '$T/monitor.out'" 10 || fail "MONITOR stream missed commands"
[ "$(grep -c '^m[123]$' "$T/sub.out")" = 3 ] || fail "subscriber output: $(cat "$T/sub.out")"
after=$(stat)
kill "$MON" "$SUB" 2>/dev/null
wait "$MON" "$SUB" 2>/dev/null
MON_N=$((after - before - 1 - 6)) # the 3 PUBLISH and 3 SET of the untraced redis-cli

# 4. redis-benchmark -P 16 (SET and GET), over TCP.
before=$(stat)
traced db-redis-bench redis-benchmark -p "$RP" -P 16 -n 800 -c 2 -t set,get -q \
    >"$T/bench.out" 2>&1 || fail "redis-benchmark failed"
after=$(stat)
grep -q 'SET: .* requests per second' "$T/bench.out" || fail "benchmark output: $(cat "$T/bench.out")"
grep -q 'GET: .* requests per second' "$T/bench.out" || fail "benchmark output: $(cat "$T/bench.out")"
BENCH_N=$((after - before - 1))

# Spans: every command the server counted from each traced client has its span.
TOTAL=$((CLI_N + PY_N + SOCK_N + MON_N + BENCH_N))
wait_for "[ \$(jq -s '[.[].spans[] | select(.componentId == 7)] | length' '$T/seg.json') -ge $TOTAL ]" 20 ||
    echo "Redis spans: $(jq -s '[.[].spans[] | select(.componentId == 7)] | length' "$T/seg.json") of $TOTAL commands" >&2
sleep 1.5
T_END=$(now_ms)
check "$DBDEFS"' [$s[] | select(.service == "db-redis-cli") | .spans[] | select(.componentId == 7)] | length == '"$CLI_N" \
    "redis-cli: one span per command ($CLI_N)"
check "$DBDEFS"' [$s[] | select(.service == "db-redis-bench") | .spans[] | select(.componentId == 7)] | length == '"$BENCH_N" \
    "redis-benchmark -P 16: one span per command ($BENCH_N)"
check "$DBDEFS"' [$s[] | select(.service == "db-redis-py") | .spans[] | select(.componentId == 7)] | length == '"$PY_N" \
    "python3-redis over TCP: one span per command ($PY_N)"
check "$DBDEFS"' [$s[] | select(.service == "db-redis-sock") | .spans[] | select(.peer == "unix:'"$RSOCK"'")]
    | length == '"$SOCK_N" "python3-redis over the Unix socket: one span per command ($SOCK_N), peer the socket path"
check "$DBDEFS"' dbspans(7) | length == '"$TOTAL" "one span per command ($TOTAL)"
check "$DBDEFS$JQDEFS"' all(dbspans(7)[]; .spanLayer == "Cache" and .spanType == "Exit"
    and tag("cache.type") == "Redis" and (.operationName | startswith("Redis/"))
    and tag("cache.cmd") == (.operationName | ltrimstr("Redis/")) and sane_times)' \
    "Redis spans: layer Cache, component 7, cache.type/cmd, times"
check "$DBDEFS$JQDEFS"' all(dbspans(7)[]; .peer == "127.0.0.1:'"$RP"'" or .peer == "unix:'"$RSOCK"'")' \
    "peers: 127.0.0.1:port or the socket path"
check "$DBDEFS$JQDEFS"' [dbspans(7)[] | select(.operationName == "Redis/GET" and tag("cache.key") == "k")
    | tag("cache.op")] | length > 0 and all(. == "read")' "GET k: cache.key k, cache.op read"
check "$DBDEFS$JQDEFS"' [dbspans(7)[] | select(.operationName == "Redis/SET")] | all(tag("cache.op") == "write")' \
    "SET: cache.op write"
check "$DBDEFS$JQDEFS"' [dbspans(7)[] | select(.operationName == "Redis/SET" or .operationName == "Redis/GET")
    | select(tag("cache.key") | startswith("bin?")) | tag("cache.key")] == ["bin??\r\nkey", "bin??\r\nkey", "bin??\r\nkey", "bin??\r\nkey"]' \
    "binary key (NUL, 0xff, CRLF) of python3-redis: cache.key with its bytes, made valid UTF-8 (TCP and socket, SET and GET)"
check "$DBDEFS$JQDEFS"' [dbspans(7)[] | select((.operationName == "Redis/INCR" or .operationName == "Redis/INCRBY") and .isError)] | length >= 3
    and all(.logs[0].data | map(select(.key == "message"))[0].value | test("not an integer"))' \
    "INCR on a string: error spans with the server's message"
check "$DBDEFS$JQDEFS"' [dbspans(7)[] | select(.isError)] | length == ([dbspans(7)[] | select((.operationName == "Redis/INCR" or .operationName == "Redis/INCRBY") and .isError)] | length)' \
    "no other span is an error"
echo "ok db_redis ($TOTAL commands: cli $CLI_N, python $PY_N + $SOCK_N (socket), monitor/subscribe $MON_N, benchmark $BENCH_N)"
