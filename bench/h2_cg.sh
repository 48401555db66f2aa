#!/usr/bin/env bash
# h2_cg.sh - the agent's cost on HTTP/2 (issue 37, Performance): instructions added per traced
# unary gRPC-like call on the application thread, client side and server side: valgrind
# callgrind of bench/h2_pair.c (N calls on one cleartext HTTP/2 connection, plain blocking
# read/write, header blocks as an HPACK encoder with a dynamic table writes them), two lengths
# bare and traced, the difference per added call (bench/cg_diff.py, as bench/db_cg.sh does).
# The peer runs traced too (the client inserts sw8, the server reads it: the entry has a ref).
# Every call is sampled (agent.sample_n_per_3_secs=-1); a reporter and collector-stub drain.
# Usage: bench/h2_cg.sh [BUILD_DIR]   (configured with -DSW_BUILD_BENCH=ON, built)
# H2CG_KEEP=1 keeps the callgrind files (their directory is printed) for callgrind_annotate.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "${1:-build}" && pwd)
LIB=$B/agent/libswagent.so
PAIR=$B/bench/sw_bench_h2_pair
STUB=$B/collector-stub/collector-stub
for f in "$LIB" "$PAIR" "$STUB" "$B/agent/swagent-reporter"; do
    [ -f "$f" ] || { echo "missing $f (build with -DSW_BUILD_BENCH=ON)" >&2; exit 1; }
done
T=$(mktemp -d /tmp/sw-h2cg.XXXXXX)
chmod 755 "$T"
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null || true; done
    if [ -n "${H2CG_KEEP:-}" ]; then echo "kept $T" >&2; else rm -rf "$T"; fi
}
trap cleanup EXIT
fail() { echo "h2_cg: $*" >&2; exit 1; }
wait_for() { local n=0; while ! eval "$1"; do n=$((n + 1)); [ $n -gt $(($2 * 10)) ] && return 1; sleep 0.1; done; }
BENCH_TAG=h2_cg
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"
cg_stub_agent h2cg || fail "collector-stub did not start"

N1=200 N2=1200
# run SIDE(client|server) TAG(bare|agent) N: SIDE under callgrind (with the agent for "agent"),
# its peer traced without valgrind.
run() {
    local side=$1 tag=$2 n=$3 pre=""
    [ "$tag" = agent ] && pre=$LIB
    local out=$T/cg.$side.$tag.$n
    rm -f "$T/srv.out" # the port of this run only
    if [ "$side" = server ]; then
        env ${pre:+LD_PRELOAD=$pre} valgrind --tool=callgrind --callgrind-out-file="$out" \
            "$PAIR" server "$n" >"$T/srv.out" 2>"$out.log" &
        local sp=$!
        wait_for "grep -q PORT '$T/srv.out'" 30 || fail "server did not start: $(tail -3 "$out.log")"
        LD_PRELOAD=$LIB "$PAIR" client "$(sed -n 's/PORT //p' "$T/srv.out")" "$n" ||
            fail "client failed"
        wait "$sp" || fail "server under callgrind failed: $(tail -3 "$out.log")"
    else
        LD_PRELOAD=$LIB "$PAIR" server "$n" >"$T/srv.out" &
        local sp=$!
        wait_for "grep -q PORT '$T/srv.out'" 10 || fail "server did not start"
        env ${pre:+LD_PRELOAD=$pre} valgrind --tool=callgrind --callgrind-out-file="$out" \
            "$PAIR" client "$(sed -n 's/PORT //p' "$T/srv.out")" "$n" 2>"$out.log" ||
            fail "client under callgrind failed: $(tail -3 "$out.log")"
        wait "$sp" || fail "server failed"
    fi
}
for side in client server; do
    for n in $N1 $N2; do
        run $side bare $n
        run $side agent $n
    done
    echo "== $side: instructions added per unary call (callgrind, top functions)"
    python3 "$ROOT/bench/cg_diff.py" "$T/cg.$side.agent.$N1" "$T/cg.$side.agent.$N2" \
        $((N2 - N1)) 25 "$T/cg.$side.bare.$N1" "$T/cg.$side.bare.$N2" $((N2 - N1)) |
        tee "$T/cg.$side.txt"
done
echo "h2 unary call, instructions added on the application thread: client $(awk '$1=="total"{print $2}' "$T/cg.client.txt"), server $(awk '$1=="total"{print $2}' "$T/cg.server.txt")"
