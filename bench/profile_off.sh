#!/usr/bin/env bash
# profile_off.sh - issue 39's "No task: instructions per request unchanged (within 1 %)":
# instructions of libswagent.so per request (valgrind callgrind, CG_OBJECT=libswagent of
# bench/cg_diff.py: the agent library's own count, per added request between a run of N1 and
# one of N2 requests) for tests/profile/slow_server.c's GET /fast from curl, no profile task,
# for two libraries (e.g. the base commit's and this one's), in three cases:
#   sampled    agent.sample_n_per_3_secs=-1 (every request sampled: entry_usual)
#   keep       sample_n_per_3_secs=1, swagent.keep_* on (unsampled requests keepable)
#   nokeep     sample_n_per_3_secs=1, keep_errors=false, keep_slow_ms=0 (unsampled: entry_none)
# In the last two the runs sample one request per 3-s window, a different number per run: the
# sampled requests (calls of sw_ring_put_segment) are taken out with the first case's cost.
# Usage: bench/profile_off.sh SLOW_SERVER LIB_A LIB_B   (prints a table; LIB_A is the base)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SRV=${1:?slow_server} A=${2:?lib a} B=${3:?lib b}
N1=100 N2=300
T=$(mktemp -d /tmp/sw-profoff.XXXXXX)
PIDS=""
trap 'for p in $PIDS; do kill "$p" 2>/dev/null || true; done; rm -rf "$T"' EXIT
run() { # TAG LIB CASE N -> callgrind file
    local lib=$2 c=$3 n=$4 out=$T/cg.$1.$3.$4
    mkdir -p "$T/run.$c.$n"
    {
        echo "agent.service_name=profoff"
        echo "collector.backend_service=127.0.0.1:1"
        echo "swagent.runtime_dir=$T/run.$c.$n"
        echo "swagent.reporter_idle_exit=3"
        case $c in
        sampled) echo "agent.sample_n_per_3_secs=-1" ;;
        keep) echo "agent.sample_n_per_3_secs=1" ;;
        nokeep) printf 'agent.sample_n_per_3_secs=1\nswagent.keep_errors=false\nswagent.keep_slow_ms=0\n' ;;
        esac
    } >"$T/agent.$c.config"
    rm -f "$T/srv.out"
    SW_AGENT_CONFIG=$T/agent.$c.config LD_PRELOAD=$lib valgrind --tool=callgrind \
        --trace-children=no --callgrind-out-file="$out" "$SRV" >"$T/srv.out" 2>"$T/cg.log" &
    local pid=$! i=0
    PIDS="$PIDS $pid"
    while ! grep -q '^PORT ' "$T/srv.out" 2>/dev/null; do
        i=$((i + 1)); [ $i -lt 300 ] || { echo "server did not start" >&2; exit 1; }; sleep 0.1
    done
    local port
    port=$(sed -n 's/^PORT //p' "$T/srv.out")
    for _ in $(seq "$n"); do curl -s "http://127.0.0.1:$port/fast" >/dev/null; done
    curl -s "http://127.0.0.1:$port/quit" >/dev/null || true
    wait "$pid" || true
    echo "$out"
}
# Segments committed in a run: calls of sw_ring_put_segment (one per sampled request).
segs() {
    local id
    id=$(grep -m1 -oP '^c?fn=\(\K[0-9]+(?=\) sw_ring_put_segment$)' "$1" || true)
    [ -n "$id" ] || { echo 0; return; }
    awk -v id="cfn=($id)" '$0 == id || index($0, id " ") == 1 { f = 1; next }
        f && /^calls=/ { split($1, a, "="); s += a[2]; f = 0 } END { print s + 0 }' "$1"
}
# The agent's instructions of one run (CG_OBJECT=libswagent: cg_diff.py's total of a run
# against an empty one is not available, so the difference of the two runs per unit is used).
delta() { CG_OBJECT=libswagent python3 "$ROOT/bench/cg_diff.py" "$1" "$2" "$3" 0 | awk '$1=="total"{print $2}'; }
printf '%-8s %14s %14s %8s  %s\n' case "A ins/req" "B ins/req" "B-A" "(sampled requests per run A, B)"
declare -A PER
for c in sampled keep nokeep; do
    ra=() rb=()
    for n in $N1 $N2; do ra+=("$(run a "$A" $c $n)"); rb+=("$(run b "$B" $c $n)"); done
    line=""
    for k in a b; do
        if [ $k = a ]; then f1=${ra[0]} f2=${ra[1]}; else f1=${rb[0]} f2=${rb[1]}; fi
        s1=$(segs "$f1") s2=$(segs "$f2")
        d=$(delta "$f1" "$f2" 1) # instructions of the N2 run minus the N1 run
        if [ $c = sampled ]; then
            PER[$k]=$(python3 -c "print(round($d / $((N2 - N1)), 1))")
        else
            # The runs sample one request per 3-s window, a different number in each: with
            # s the all-sampled cost per request, dT = dN*u + dS*(s - u), solved for u.
            PER[$k]=$(python3 -c "dT=$d; dN=$((N2 - N1)); dS=$s2-$s1; s=${PER[${k}s]}; print(round((dT - dS*s)/(dN - dS), 1))")
        fi
        [ $c = sampled ] && PER[${k}s]=${PER[$k]}
        line="$line $s1/$s2"
    done
    printf '%-8s %14s %14s %8s  %s\n' "$c" "${PER[a]}" "${PER[b]}" \
        "$(python3 -c "print(round(${PER[b]} - ${PER[a]}, 1))")" "($line )"
done
