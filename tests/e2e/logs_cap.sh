#!/usr/bin/env bash
# logs_cap.sh - the log capture's cap and its cost (swagent.log_cap_bytes_per_sec; docs/logs.md):
# a traced C program (logs_flood.c) writes 100 MB to stdout as 1,000,000 writes of 100 bytes
# with swagent.log_capture=all and the default cap (1 MiB/s):
#  1. every byte is accounted for in its ring's counters (`swagent status`: log_bytes +
#     log_capped + log_lost = 100,000,000), some were over the cap, at most the cap's worth
#     per second of writing was captured, and exactly the captured lines arrive at
#     collector-stub, each whole (a write is captured whole or not at all);
#  2. its stdout is byte-identical to the same program's without the agent;
#  3. the slowdown is the cap's bookkeeping only: the best of 3 alternating runs each, CPU time
#     of the writes (user + system), traced within 1.5x + 50 ms of bare (printed: the ratio;
#     LOGS_CAP_BOUND_PCT, 400 with a sanitized agent: tests/e2e.cmake).
E2E_NAME=logs_cap
. "$E2E_DIR/lib.sh"
e2e_init
write_config 'swagent.log_capture=all' 'swagent.log_cap_bytes_per_sec=1048576'
STUB_ARGS="--logs $T/logs.json" start_stub
: >>"$T/logs.json"
CC=${CC:-cc}
"$CC" -O2 -o "$T/flood" "$E2E_DIR/logs_flood.c" 2>"$T/cc.err" || fail "cannot build logs_flood: $(cat "$T/cc.err")"
N=1000000
TOTAL=$((N * 100))
CAP=1048576

# ---- 1. the counters and the lines ----
t0=$(now_ms)
env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=e2e-logs-cap "$T/flood" $N 60 >"$T/traced.out" 2>"$T/traced.err" &
FPID=$!
PIDS="$PIDS $FPID"
wait_for "grep -q cpu_us '$T/traced.err'" 60 || fail "the traced writer did not finish"
t1=$(now_ms)
"$SWAGENT_CLI" status --runtime-dir "$T/run" >"$T/status.out" 2>&1
row=$(grep -a "pid $FPID live" "$T/status.out") || fail "no ring of the writer in the status: $(cat "$T/status.out")"
val() { echo "$row" | sed -n "s/.* $1=\([0-9]*\).*/\1/p"; }
B=$(val log_bytes) C=$(val log_capped) L=$(val log_lost)
echo "captured $B, over the cap $C, lost $L bytes in $((t1 - t0)) ms"
[ -n "$B" ] && [ -n "$C" ] && [ -n "$L" ] || fail "status row without log counters: $row"
[ $((B + C + L)) -eq $TOTAL ] || fail "bytes not accounted for: $B + $C + $L != $TOTAL"
[ "$C" -gt 0 ] || fail "nothing was over the cap"
[ "$B" -gt 0 ] && [ $((B % 100)) -eq 0 ] || fail "captured $B bytes: not whole writes"
secs=$(((t1 - t0 + 999) / 1000 + 1))
[ "$B" -le $((CAP * secs)) ] || fail "captured $B bytes in $secs s windows, cap $CAP/s"
want=$((B / 100))
wait_for "[ \$(lines '$T/logs.json') -ge $want ]" 60 || fail "$(lines "$T/logs.json") of $want lines arrived"
sleep 1
[ "$(lines "$T/logs.json")" -eq "$want" ] || fail "$(lines "$T/logs.json") lines arrived, $want captured"
jq -e -s 'all(.[]; (.text | test("^[0-9]bcdefghijklmnopqrstuvwxyz(abcdefghijklmnopqrstuvwxyz){2}abcdefghijklmnopqrstu$"))
    and .traceContext == null and .service == "e2e-logs-cap")' "$T/logs.json" >/dev/null ||
    fail "a line arrived cut, joined or with a context: $(jq -r '.text' "$T/logs.json" | grep -v '^[0-9]bcd' | head -3)"
kill "$FPID"
wait "$FPID" 2>/dev/null

# ---- 2. byte-identical ----
"$T/flood" $N >"$T/bare.out" 2>"$T/bare.err" || fail "the bare writer failed"
cmp "$T/traced.out" "$T/bare.out" || fail "stdout differs with the agent"
rm -f "$T/traced.out" "$T/bare.out"

# ---- 3. the cost: CPU time of the writes, best of 3 alternating runs each ----
best_bare="" best_traced=""
for i in 1 2 3; do
    "$T/flood" $N >/dev/null 2>"$T/b$i.err" || fail "bare run $i"
    env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=e2e-logs-cap "$T/flood" $N >/dev/null 2>"$T/t$i.err" || fail "traced run $i"
    b=$(sed -n 's/^cpu_us //p' "$T/b$i.err") t=$(sed -n 's/^cpu_us //p' "$T/t$i.err")
    [ -z "$best_bare" ] || [ "$b" -lt "$best_bare" ] && best_bare=$b
    [ -z "$best_traced" ] || [ "$t" -lt "$best_traced" ] && best_traced=$t
done
ratio=$(awk -v t="$best_traced" -v b="$best_bare" 'BEGIN { printf "%.2f", t / b }')
echo "100 MB in 1,000,000 writes: bare ${best_bare} us, traced (capped) ${best_traced} us CPU: ${ratio}x"
BOUND=${LOGS_CAP_BOUND_PCT:-150}
[ "$best_traced" -le $((best_bare * BOUND / 100 + 50000)) ] ||
    fail "the capped writer took ${ratio}x the bare one's CPU (${best_traced} vs ${best_bare} us)"
echo "ok logs_cap"
