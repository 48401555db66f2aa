#!/usr/bin/env bash
# bench/keep_cost.sh - what keeping errors and slow requests beyond the quota (swagent.keep_errors,
# swagent.keep_slow_ms; agent/trace.c "Keeping beyond the quota") costs an unsampled request
# that ends fine, in instructions (callgrind, which repeats exactly): nginx (one process,
# master_process off) serving N keep-alive requests for a 612-byte file, and the minimal server
# of bench/, each bare, traced with keeping off and traced with keeping on (the defaults), with
# agent.sample_n_per_3_secs=1 so that all but one request per 3 s go unsampled. Per request:
# the N2 - N1 difference of two runs (bench/cg_diff.py), against the bare one.
#
#   bench/keep_cost.sh [--lib=OTHER/libswagent.so]   # ~3 minutes; OTHER: a third variant
#                                                    # (another build, keeping as it has it)
# Writes bench/report/keep_cost.txt.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OTHER=""
for a in "$@"; do
    case $a in
    --lib=*) OTHER=${a#--lib=} ;;
    *) echo "usage: $0 [--lib=OTHER/libswagent.so]" >&2; exit 2 ;;
    esac
done
N1=${KEEP_N1:-500}
N2=${KEEP_N2:-2500}
BUILD=${SW_BENCH_BUILD:-$ROOT/build-bench}
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSW_BUILD_BENCH=ON \
    -DSW_BUILD_TESTS=OFF >/dev/null
nice cmake --build "$BUILD" -j2 --target swagent sw_bench_server sw_bench_client >/dev/null
LIB=$BUILD/agent/libswagent.so
BB=$BUILD/bench
BENCH_TAG=keep_cost
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"
T=$(mktemp -d /tmp/swagent-keep.XXXXXX)
chmod 755 "$T"
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
    rm -rf "$T"
}
trap cleanup EXIT
mkdir -p "$T/www" "$T/run"
chmod 700 "$T/run"
head -c 612 /dev/zero | tr '\0' 'x' >"$T/www/small.txt"
# conf FILE LINES...: an agent.config. No ring (swagent.ring_total_cap below its size): the one
# sampled request per 3 s is dropped, and no reporter is started (a spawn attempt every 5 s, made
# by a process under callgrind, cost ~10,000 instructions per request of these runs).
conf() {
    local f=$1
    shift
    {
        echo "agent.service_name=keep-cost"
        echo "agent.sample_n_per_3_secs=1"
        echo "swagent.runtime_dir=$T/run"
        echo "swagent.reporter_path=/bin/true"
        echo "swagent.ring_total_cap=65536"
        for l in "$@"; do echo "$l"; done
    } >"$f"
}
conf "$T/on.config"
conf "$T/off.config" "swagent.keep_errors=false" "swagent.keep_slow_ms=0"

cg_nginx() { # TAG N PRELOAD CONFIG
    cg_nginx_run "$T/ng.$1.$2" "$2" "$3" "$4" "$T/ng-$1-$2" "$T/www"
}
cg_server() { # TAG N PRELOAD CONFIG
    local tag=$1 n=$2 pre=$3 cfg=$4 vp
    rm -f "$T/cg.port"
    env SW_AGENT_CONFIG="$cfg" ${pre:+LD_PRELOAD=$pre} valgrind --tool=callgrind \
        --trace-children=no --callgrind-out-file="$T/ms.$tag.$n" "$BB/sw_bench_server" http \
        "$T/cg.port" "$n" 2>"$T/ms.$tag.$n.log" &
    vp=$!
    PIDS+=($vp)
    wait_file "$T/cg.port"
    "$BB/sw_bench_client" "$(cat "$T/cg.port")" "$n"
    wait $vp
}
VARIANTS="off on"
[ -n "$OTHER" ] && VARIANTS="$VARIANTS other"
lib_of() { case $1 in other) echo "$OTHER" ;; *) echo "$LIB" ;; esac; }
cfg_of() { case $1 in off) echo "$T/off.config" ;; *) echo "$T/on.config" ;; esac; }
for n in $N1 $N2; do
    cg_nginx bare "$n" "" "$T/on.config"
    cg_server bare "$n" "" "$T/on.config"
    for v in $VARIANTS; do
        cg_nginx "$v" "$n" "$(lib_of $v)" "$(cfg_of $v)"
        cg_server "$v" "$n" "$(lib_of $v)" "$(cfg_of $v)"
    done
done
OUT=$ROOT/bench/report/keep_cost.txt
mkdir -p "$(dirname "$OUT")"
DIFF=$ROOT/bench/cg_diff.py
total() { awk '$1=="total"{print $2}' "$1"; }
{
    echo "# bench/keep_cost.sh: instructions per unsampled request that ends fine, callgrind"
    echo "# (agent.sample_n_per_3_secs=1; the difference of $N1 and $N2 requests; commit $(git -C "$ROOT" rev-parse --short HEAD))"
    for s in ng ms; do
        name=$([ $s = ng ] && echo nginx || echo minimal)
        python3 "$DIFF" "$T/$s.bare.$N1" "$T/$s.bare.$N2" $((N2 - N1)) 8 >"$T/$s.bare.txt"
        for v in $VARIANTS; do
            python3 "$DIFF" "$T/$s.$v.$N1" "$T/$s.$v.$N2" $((N2 - N1)) 14 \
                "$T/$s.bare.$N1" "$T/$s.bare.$N2" $((N2 - N1)) >"$T/$s.$v.txt"
        done
        b=$(total "$T/$s.bare.txt") off=$(total "$T/$s.off.txt") on=$(total "$T/$s.on.txt")
        awk -v n="$name" -v b="$b" -v off="$off" -v on="$on" 'BEGIN {
            printf "%s: bare %.1f; the agent adds %.1f with keeping off, %.1f with it on: keeping adds %.1f\n",
                n, b, off - b, on - b, on - off }'
        if [ -n "$OTHER" ]; then
            awk -v n="$name" -v b="$b" -v o="$(total "$T/$s.other.txt")" \
                'BEGIN { printf "%s: --lib adds %.1f\n", n, o - b }'
        fi
    done
    for v in $VARIANTS; do
        for s in ng ms; do
            echo "--- $([ $s = ng ] && echo nginx || echo minimal) keep=$v: the agent's functions (bare's subtracted)"
            tail -n +2 "$T/$s.$v.txt"
        done
    done
} | tee "$OUT"
