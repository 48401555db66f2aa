#!/usr/bin/env bash
# spool_exit.sh - a reporter whose collector is gone leaves, and nothing is lost (issue 33):
#  - the collector stops; 20 traced curl processes each make a segment; their reporter spools
#    them (the collector is unreachable) and, with no traced process left, exits after
#    swagent.reporter_idle_exit (3 s) instead of retrying for ever;
#  - `swagent status` shows the 20 undelivered segments in the collector's spool, no reporter;
#  - the collector comes back on the same address; a new traced process starts a new reporter,
#    which replays the spool: all 21 segments arrive, each exactly once.
E2E_NAME=spool_exit
. "$E2E_DIR/lib.sh"
e2e_init
start_stub
SPORT=${COLLECTOR##*:}
kill "$STUB_PID"
wait_for "! kill -0 $STUB_PID 2>/dev/null" 10 || fail "stub did not stop"
mkdir "$T/www"
echo spooled >"$T/www/s.txt"
python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/www" >"$T/plain.out" 2>&1 &
PIDS="$PIDS $!"
wait_for "grep -q 'port [0-9]' '$T/plain.out'" 10 || fail "untraced server did not start"
PL=$(sed -n 's/^Serving HTTP on .* port \([0-9]*\) .*/\1/p' "$T/plain.out")
N=20
for i in $(seq 1 $N); do
    traced spool-curl curl -sSf -o /dev/null "http://127.0.0.1:$PL/s.txt?i=$i" || fail "curl $i failed"
done
rlog=$T/run/swagent-reporter.log
wait_for "grep -q 'started: pid' '$rlog' 2>/dev/null" 10 || fail "no reporter started"
rp=$(sed -n 's/.*reporter [0-9.]* started: pid \([0-9]*\),.*/\1/p' "$rlog" | head -n 1)
# Spooled (the collector is down), no traced process left: it leaves after its idle time.
wait_for "! kill -0 $rp 2>/dev/null" 30 || fail "the reporter of an unreachable collector did not leave"
grep -q "exiting: $N segment(s) in [0-9]* spool file(s)" "$rlog" ||
    fail "the reporter did not leave with the $N segments in its spool"
ls "$T/run"/ring-*.swr >/dev/null 2>&1 && fail "rings left behind: $(ls "$T/run")"
"$SWAGENT_CLI" status --runtime-dir "$T/run" >"$T/status1.out" 2>&1 || fail "swagent status failed"
grep -q "^  127.0.0.1_$SPORT: [0-9]* file(s), [0-9]* bytes, $N segment(s) not delivered yet in .* (no reporter" \
    "$T/status1.out" || fail "swagent status does not show the spool: $(cat "$T/status1.out")"
[ "$(lines "$T/seg.json")" -eq 0 ] || fail "segments arrived while the collector was down"

# The collector is back; the next traced process's reporter replays the spool.
"$COLLECTOR_STUB" --listen "127.0.0.1:$SPORT" --port-file "$T/stub2.port" --segments "$T/seg.json" \
    --management "$T/mgmt.json" 2>>"$T/stub.err" &
PIDS="$PIDS $!"
wait_for "[ -s '$T/stub2.port' ]" 10 || fail "collector-stub did not start again on port $SPORT"
traced spool-late curl -sSf -o /dev/null "http://127.0.0.1:$PL/s.txt?late" || fail "late curl failed"
wait_segments $((N + 1)) 30
T_END=$(now_ms)
check "$JQDEFS"' length == '$((N + 1))' and ([.[].traceSegmentId] | unique | length) == '$((N + 1))'
    and (seg("spool-curl") | length) == '$N' and (seg("spool-late") | length) == 1' \
    "every segment exactly once: $N replayed from the spool, 1 live"
grep -c 'started: pid' "$rlog" | grep -qx 2 || fail "expected a second reporter"
"$SWAGENT_CLI" status --runtime-dir "$T/run" >"$T/status2.out" 2>&1 || fail "swagent status failed"
sed -n '/^spool/,$p' "$T/status2.out" | grep -q '^  none$' ||
    fail "the spool is not empty after the replay: $(cat "$T/status2.out")"
echo "ok spool_exit"
