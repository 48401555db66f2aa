#!/usr/bin/env bash
# db_cg.sh - the agent's cost on database and cache clients (issue 36, Performance):
#   1. instructions per traced command on the client's thread: valgrind callgrind of
#      bench/db_client.c (N round trips on one connection, plain read/write), two lengths bare
#      and traced, the difference per added command (bench/cg_diff.py, the same method as the
#      HTTP figures of bench/run.sh). Commands: Redis GET, SET, GET pipelined 16 to a write
#      (per command), PostgreSQL simple query and extended (Parse/Bind/Execute/Sync), memcached
#      get, and Redis GET not sampled (agent.sample_n_per_3_secs=1: the first command of the run
#      is a trace, the others are not). "total" is the traced run's instructions per command (the
#      figure issue 36 first measured), "added" that minus the bare run's;
#   2. timed ratios traced/bare: redis-benchmark GET and SET with -P 1 and -P 16, pgbench -S
#      (simple protocol), with the share of commands that got a span (collector-stub's count).
# Usage: bench/db_cg.sh [--cg-only | --timed-only] [BUILD_DIR]   (configured with -DSW_BUILD_BENCH=ON, built)
# Servers: redis-server and PostgreSQL 15 from Debian (scripts/deps.sh), started here on free
# loopback ports, stopped by PID. Timed runs are short (noisy on a shared 2-core VM: report
# them with that in mind; the instruction counts repeat exactly).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CG_ONLY=0 TIMED_ONLY=0
if [ "${1:-}" = --cg-only ]; then
    CG_ONLY=1
    shift
elif [ "${1:-}" = --timed-only ]; then
    TIMED_ONLY=1
    shift
fi
B=$(cd "${1:-build}" && pwd)
LIB=$B/agent/libswagent.so
CL=$B/bench/sw_bench_db_client
STUB=$B/collector-stub/collector-stub
for f in "$LIB" "$CL" "$STUB" "$B/agent/swagent-reporter"; do
    [ -x "$f" ] || [ -f "$f" ] || { echo "missing $f (build with -DSW_BUILD_BENCH=ON)" >&2; exit 1; }
done
T=$(mktemp -d /tmp/sw-dbcg.XXXXXX)
chmod 755 "$T"
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null || true; done
    sleep 0.5
    for p in $PIDS; do kill -9 "$p" 2>/dev/null || true; done
    rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "db_cg: $*" >&2; exit 1; }
wait_for() { local n=0; while ! eval "$1"; do n=$((n + 1)); [ $n -gt $(($2 * 10)) ] && return 1; sleep 0.1; done; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
. "$ROOT/tests/db/dblib.sh"

"$STUB" --listen 127.0.0.1:0 --port-file "$T/stub.port" --segments "$T/seg.json" \
    --management "$T/mgmt.json" 2>"$T/stub.err" &
PIDS="$PIDS $!"
wait_for "[ -s '$T/stub.port' ]" 10 || fail "collector-stub did not start"
mkdir -m 700 "$T/run"
cat >"$T/agent.config" <<CONF
agent.service_name=dbcg
collector.backend_service=127.0.0.1:$(cat "$T/stub.port")
agent.sample_n_per_3_secs=-1
swagent.runtime_dir=$T/run
swagent.reporter_path=$B/agent/swagent-reporter
swagent.reporter_idle_exit=3
CONF
export SW_AGENT_CONFIG=$T/agent.config
start_redis
start_pg
start_memcached

# ---- 1. instructions
N1=200 N2=1200
sed 's/^agent.sample_n_per_3_secs=.*/agent.sample_n_per_3_secs=1/' "$T/agent.config" >"$T/unsampled.config"
cg() { # MODE TAG N PRELOAD PORT [CONFIG]
    env ${4:+LD_PRELOAD=$4} ${6:+SW_AGENT_CONFIG=$6} valgrind --tool=callgrind --trace-children=no \
        --callgrind-out-file="$T/cg.$1.$2.$3" "$CL" "${1%-unsampled}" "$5" "$3" 2>"$T/cg.$1.$2.$3.log" ||
        fail "callgrind $1 $2 $3: $(tail -n 5 "$T/cg.$1.$2.$3.log")"
}
RESULT=""
MODES="redis redis-set redis-p16 pg pg-ext mc redis-unsampled"
[ $TIMED_ONLY = 1 ] && MODES=""
for mode in $MODES; do
    port=$RP conf="" per=1
    case $mode in
    pg*) port=$PGP ;;
    mc) port=$MP ;;
    redis-p16) per=16 ;;
    redis-unsampled) conf=$T/unsampled.config ;;
    esac
    for n in $N1 $N2; do
        cg $mode bare $n "" "$port"
        cg $mode agent $n "$LIB" "$port" "$conf"
    done
    units=$(((N2 - N1) * per))
    bare=$(python3 "$ROOT/bench/cg_diff.py" "$T/cg.$mode.bare.$N1" "$T/cg.$mode.bare.$N2" $units 0 |
        awk '$1=="total"{print $2}')
    echo "== $mode: instructions per command (callgrind; top functions the agent adds)"
    python3 "$ROOT/bench/cg_diff.py" "$T/cg.$mode.agent.$N1" "$T/cg.$mode.agent.$N2" $units 25 \
        "$T/cg.$mode.bare.$N1" "$T/cg.$mode.bare.$N2" $units | tee "$T/cg.$mode.txt"
    total=$(awk '$1=="total"{print $2}' "$T/cg.$mode.txt")
    added=$(python3 -c "print(round($total - $bare, 1))")
    echo "$mode: total $total bare $bare added $added"
    RESULT="$RESULT ir_${mode//-/_}=$total added_${mode//-/_}=$added"
done
IR_REDIS=$(awk '$1=="total"{print $2}' "$T/cg.redis.txt" 2>/dev/null || true)
IR_PG=$(awk '$1=="total"{print $2}' "$T/cg.pg.txt" 2>/dev/null || true)

if [ $CG_ONLY = 1 ]; then
    echo "RESULT ir_redis_get=$IR_REDIS ir_pg_simple_query=$IR_PG$RESULT"
    exit 0
fi

# ---- 2. timed ratios: ROUNDS rounds of bare then traced runs, each ratio printed and their
# median; spans counted once the collector-stub's count stops moving (what the reporter had
# not sent yet is counted too). The share of commands traced is below 1 when the ring sheds
# (the reporter cannot keep up: ring_admits) -- that is what it says.
ROUNDS=${DB_CG_ROUNDS:-3}
spans() { jq -s "[.[].spans[] | select(.componentId == $1)] | length" "$T/seg.json" 2>/dev/null || echo 0; }
settled() { # COMPONENT: the span count once it has not moved for a second (at most 20 s)
    local a b n=0
    a=$(spans "$1")
    while [ $n -lt 20 ]; do
        sleep 1
        b=$(spans "$1")
        [ "$a" = "$b" ] && break
        a=$b n=$((n + 1))
    done
    echo "$a"
}
rps() { tr '\r' '\n' <"$2" | sed -n "s/^ *$1: \([0-9.]*\) requests per second.*/\1/p" | tail -n 1; }
median() { python3 -c "import statistics,sys; print(round(statistics.median(float(x) for x in sys.argv[1:]), 3))" "$@"; }
echo "== redis-benchmark (20000 requests, 2 clients, GET and SET), $ROUNDS rounds bare then traced"
for P in 1 16; do
    rs="" rg="" sent=0 before=$(settled 7)
    for r in $(seq "$ROUNDS"); do
        redis-benchmark -p "$RP" -P $P -n 20000 -c 2 -t get,set -q >"$T/rb.bare.$P" 2>&1
        LD_PRELOAD=$LIB redis-benchmark -p "$RP" -P $P -n 20000 -c 2 -t get,set -q >"$T/rb.agent.$P" 2>&1
        sent=$((sent + 40000))
        for t in SET GET; do
            b=$(rps $t "$T/rb.bare.$P") a=$(rps $t "$T/rb.agent.$P")
            x=$(python3 -c "print(round($a/$b, 3))")
            echo "redis $t -P $P round $r: bare $b/s traced $a/s ratio $x"
            if [ $t = SET ]; then rs="$rs $x"; else rg="$rg $x"; fi
        done
    done
    after=$(settled 7)
    echo "redis -P $P: median ratio SET $(median $rs) GET $(median $rg); spans $((after - before)) for $sent commands (+ the benchmark's own CONFIG GETs): $(python3 -c "print(round(100 * $((after - before)) / $sent, 1))") % traced"
done
echo "== pgbench -S -T 3, simple protocol, 1 client, $ROUNDS rounds bare then traced"
"$PG_BIN/pgbench" -h 127.0.0.1 -p "$PGP" -U postgres -i -s 1 -q postgres >/dev/null 2>&1
rp="" xs=0 before=$(settled 22)
for r in $(seq "$ROUNDS"); do
    "$PG_BIN/pgbench" -h 127.0.0.1 -p "$PGP" -U postgres -S -T 3 -c 1 postgres >"$T/pb.bare" 2>&1
    LD_PRELOAD=$LIB "$PG_BIN/pgbench" -h 127.0.0.1 -p "$PGP" -U postgres -S -T 3 -c 1 postgres >"$T/pb.agent" 2>&1
    tb=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$T/pb.bare") ta=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$T/pb.agent")
    xa=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$T/pb.agent")
    xs=$((xs + xa))
    x=$(python3 -c "print(round($ta/$tb, 3))")
    rp="$rp $x"
    echo "pgbench -S round $r: bare $tb tps traced $ta tps ratio $x"
done
after=$(settled 22)
echo "pgbench -S: median ratio $(median $rp); spans $((after - before)) for $xs transactions (+ pgbench's own setup queries): $(python3 -c "print(round(100 * $((after - before)) / $xs, 1))") % traced"
echo "RESULT ir_redis_get=$IR_REDIS ir_pg_simple_query=$IR_PG$RESULT"
