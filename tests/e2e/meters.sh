#!/usr/bin/env bash
# meters.sh - meters from swagent-reporter (MeterReportService/collectBatch; agent/reporter/meter.c),
# read from /proc, never made in the application:
#  1. meter.report_interval=1: a traced python3 server with 3 threads that holds ~64 MiB and
#     spins one thread for a while, 5 requests: collector-stub receives one MeterDataCollection
#     per report for its instance with the Python agent's instance_pvm_* names and swagent_*
#     counters, service/instance/timestamp on each; threads equal /proc/PID/status's Threads,
#     RSS / MemTotal matches VmRSS (10 %), the machine's memory in use matches /proc/meminfo
#     (10 points), the process's CPU over a 6 s spin (at least 5 % of a core: the machine is
#     shared) matches its /proc/PID/stat ticks over the same time (15 points or 30 %) and is
#     under 10 % while idle (only reports whose whole span lies in the phase: the reporter,
#     SCHED_IDLE, reports late on a loaded machine), segments committed = sent = 5;
#     `swagent status` shows the reports.
#  2. meter.active=false: no meter arrives, the status says meters=off.
E2E_NAME=meters
. "$E2E_DIR/lib.sh"
e2e_init
write_config 'meter.report_interval=1' 'meter.active=${SW_METER_ACTIVE:true}'
# The stub, its meters in their own file.
"$COLLECTOR_STUB" --listen 127.0.0.1:0 --port-file "$T/stub.port" --segments "$T/seg.json" \
    --management "$T/mgmt.json" --meters "$T/meters.json" 2>"$T/stub.err" &
PIDS="$PIDS $!"
wait_for "[ -s '$T/stub.port' ]" 10 || fail "collector-stub did not start"
export SW_AGENT_COLLECTOR_BACKEND_SERVICES=127.0.0.1:$(cat "$T/stub.port")
: >>"$T/seg.json"
: >>"$T/meters.json"

start_server srv traced e2e-meters python3 -u "$E2E_DIR/meter_server.py"
SRV=$PORT SRV_PID=$LAST_PID
for i in 1 2 3 4 5; do curl -sSf -o /dev/null "http://127.0.0.1:$SRV/r$i" || fail "request $i"; done
wait_segments 5

# The meters of the instance: one JSON object per line and meter: name value timestamp.
meter_lines() { # SERVICE -> "timestamp name value" lines
    jq -r --arg s "$1" '.meters[] | select(.service == $s) | "\(.timestamp) \(.name) \(.value)"' \
        "$T/meters.json" 2>/dev/null
}
latest() { # SERVICE NAME -> the value of the latest report
    meter_lines "$1" | awk -v n="$2" '$2 == n {v = $3} END {print v}'
}
wait_for "[ \"\$(latest e2e-meters swagent_segments_sent)\" = 5 ]" 20 ||
    fail "no meter report with swagent_segments_sent=5: $(tail -c 2000 "$T/meters.json")"

# Names, one collection per instance and report, service/instance/timestamp on every meter.
INST=$(jq -r 'select(.service == "e2e-meters") | .serviceInstance' "$T/mgmt.json" | head -1)
[ -n "$INST" ] || fail "no heartbeat from e2e-meters"
jq -e -s --arg i "$INST" --argjson t0 "$T_START" '
    [.[] | select(.method == "collectBatch" and .meters[0].service == "e2e-meters")] as $r
    | ($r | length) >= 1
    and all($r[]; ([.meters[].name] | sort) == ([
        "instance_pvm_process_cpu_utilization", "instance_pvm_process_mem_utilization",
        "instance_pvm_thread_active_count", "instance_pvm_total_cpu_utilization",
        "instance_pvm_total_mem_utilization", "swagent_keep_limited", "swagent_kept_errors",
        "swagent_kept_slow", "swagent_ring_fill", "swagent_segments_committed",
        "swagent_segments_dropped", "swagent_segments_failed", "swagent_segments_sent",
        "swagent_segments_shed", "swagent_segments_spooled"] | sort)
        and all(.meters[]; .serviceInstance == $i and (.timestamp | tonumber) >= $t0
            and (.labels | length) == 0 and (.value | type) == "number"))' \
    "$T/meters.json" >/dev/null || fail "meter names, instance or timestamps wrong: $(tail -c 3000 "$T/meters.json")"

# Values against /proc, read now (the server is idle: threads and RSS do not move).
threads=$(awk '/^Threads:/ {print $2}' /proc/"$SRV_PID"/status)
rss_kb=$(awk '/^VmRSS:/ {print $2}' /proc/"$SRV_PID"/status)
total_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
avail_kb=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
sleep 1.5 # one more report after the reads
[ "$(latest e2e-meters instance_pvm_thread_active_count)" = "$threads" ] ||
    fail "threads: meter $(latest e2e-meters instance_pvm_thread_active_count), /proc $threads"
awk -v f="$(latest e2e-meters instance_pvm_process_mem_utilization)" -v r="$rss_kb" -v t="$total_kb" \
    'BEGIN { m = f * t; exit !(m > r * 0.9 && m < r * 1.1 && r > 60000) }' ||
    fail "RSS: meter $(latest e2e-meters instance_pvm_process_mem_utilization) x $total_kb kB, VmRSS $rss_kb kB"
awk -v u="$(latest e2e-meters instance_pvm_total_mem_utilization)" -v t="$total_kb" -v a="$avail_kb" \
    'BEGIN { p = (t - a) / t * 100; exit !(u > p - 10 && u < p + 10 && u > 0 && u < 100) }' ||
    fail "machine memory: meter $(latest e2e-meters instance_pvm_total_mem_utilization) %, /proc $(( (total_kb - avail_kb) * 100 / total_kb )) %"
tcpu=$(latest e2e-meters instance_pvm_total_cpu_utilization)
awk -v c="$tcpu" 'BEGIN { exit !(c >= 0 && c <= 100) }' || fail "machine CPU meter $tcpu %"
[ "$(latest e2e-meters swagent_segments_committed)" = 5 ] || fail "committed meter"
awk -v f="$(latest e2e-meters swagent_ring_fill)" 'BEGIN { exit !(f >= 0 && f < 1) }' || fail "ring fill"

# CPU. Each report's value is the process's CPU since its previous report, so only the reports
# whose whole span (previous report .. this one) lies inside a phase are compared with it (the
# reporter runs under SCHED_IDLE: on a loaded machine its reports come late and irregularly).
# cpu_reports FROM TO -> the values of the reports whose span lies within [FROM, TO] (ms)
cpu_reports() {
    meter_lines e2e-meters | awk '$2 == "instance_pvm_process_cpu_utilization" {print $1, $3}' |
        sort -n | awk -v a="$1" -v b="$2" 'NR > 1 && p >= a && $1 <= b {print $2} {p = $1}'
}
clk=$(getconf CLK_TCK)
ticks() { awk '{sub(/.*\) /, ""); print $12 + $13}' /proc/"$SRV_PID"/stat; }
# Idle: 3 s with nothing to do.
i0=$(now_ms)
sleep 3.2
i1=$(now_ms)
idle=$(cpu_reports "$i0" "$i1")
[ -n "$idle" ] || fail "no CPU report spans the idle 3 s ($i0..$i1): $(meter_lines e2e-meters | grep process_cpu | tail -5)"
for v in $idle; do
    awk -v c="$v" 'BEGIN { exit !(c >= 0 && c < 10) }' || fail "idle CPU meter $v % (all: $idle)"
done
# A 6 s spin: its /proc ticks against the reports that span only the spin.
curl -sSf -o /dev/null "http://127.0.0.1:$SRV/spin?s=6" || fail "spin request"
a_ticks=$(ticks) a_ms=$(now_ms)
sleep 5.5
b_ticks=$(ticks) b_ms=$(now_ms)
sleep 1.2 # the report after the spin
expect=$(awk -v d=$((b_ticks - a_ticks)) -v hz="$clk" -v ms=$((b_ms - a_ms)) 'BEGIN { printf "%.1f", d / hz / (ms / 1000) * 100 }')
got=$(cpu_reports "$a_ms" "$b_ms" | awk '{ s += $1; n++ } END { if (n) printf "%.1f", s / n; else print "none" }')
[ "$got" != none ] || fail "no CPU report spans only the spin ($a_ms..$b_ms): $(meter_lines e2e-meters | grep process_cpu | tail -8)"
awk -v g="$got" -v e="$expect" 'BEGIN { d = g - e; if (d < 0) d = -d; exit !(e >= 5 && (d < 15 || d < e * 0.3)) }' ||
    fail "process CPU during the spin: meters $got %, /proc $expect % (the spin needs 5 % of a core at least)"
echo "spin: meters $got %, /proc $expect %"

"$SWAGENT_CLI" status --runtime-dir "$T/run" >"$T/status.out" 2>&1
grep -q 'meters=on interval_s=1 reports=[1-9]' "$T/status.out" || fail "status: $(grep meters= "$T/status.out")"

# ---- 2. meter.active=false ----
kill "$SRV_PID"
wait "$SRV_PID" 2>/dev/null
wait_for "[ -z \"\$(reporter_pid)\" ]" 15 || fail "the reporter did not exit after its process"
: >"$T/meters.json.before"
cp "$T/meters.json" "$T/meters.json.before"
export SW_METER_ACTIVE=false
start_server srv2 traced e2e-meters-off python3 -u "$E2E_DIR/meter_server.py"
unset SW_METER_ACTIVE
curl -sSf -o /dev/null "http://127.0.0.1:$PORT/x" || fail "request to the second server"
sleep 3.5
cmp -s "$T/meters.json" "$T/meters.json.before" || fail "meters arrived with meter.active=false"
[ "$(jq -r 'select(.service == "e2e-meters-off") | .method' "$T/mgmt.json" | head -1)" != "" ] ||
    fail "the second server's reporter sent no heartbeat (is it running?)"
"$SWAGENT_CLI" status --runtime-dir "$T/run" >"$T/status2.out" 2>&1
grep -q 'meters=off' "$T/status2.out" || fail "status: $(grep meters= "$T/status2.out")"
echo "ok meters"
