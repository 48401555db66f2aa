#!/usr/bin/env bash
# profile_off.sh - issue 39's "No task: instructions per request unchanged (within 1 %)":
# instructions of libswagent.so per request (valgrind callgrind, CG_OBJECT=libswagent of
# bench/cg_diff.py: the agent library's own count, per added request between a run of N1 and
# one of N2 requests) for tests/profile/slow_server.c's GET /fast from curl, no profile task,
# for two libraries (e.g. the base commit's and this one's), in three cases:
#   sampled    agent.sample_n_per_3_secs=-1 (every request sampled: entry_usual)
#   keep       sample_n_per_3_secs=1, swagent.keep_* on (unsampled requests keepable)
#   nokeep     sample_n_per_3_secs=1, keep_errors=false, keep_slow_ms=0 (unsampled: entry_none)
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
printf '%-8s %14s %14s %8s\n' case "A ins/req" "B ins/req" "B-A"
for c in sampled keep nokeep; do
    ra=() rb=()
    for n in $N1 $N2; do ra+=("$(run a "$A" $c $n)"); rb+=("$(run b "$B" $c $n)"); done
    ia=$(CG_OBJECT=libswagent python3 "$ROOT/bench/cg_diff.py" "${ra[0]}" "${ra[1]}" $((N2 - N1)) 0 | awk '$1=="total"{print $2}')
    ib=$(CG_OBJECT=libswagent python3 "$ROOT/bench/cg_diff.py" "${rb[0]}" "${rb[1]}" $((N2 - N1)) 0 | awk '$1=="total"{print $2}')
    printf '%-8s %14s %14s %8s\n' "$c" "$ia" "$ib" "$(python3 -c "print(round($ib - $ia, 1))")"
done
