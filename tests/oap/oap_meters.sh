#!/usr/bin/env bash
# oap_meters.sh - swagent-reporter's meters (MeterReportService, agent/reporter/meter.c) at a
# real SkyWalking OAP 10.1.0, read back through GraphQL/MQE as the UI's instance dashboard reads
# them (issue 38 item 4): a traced python3 server (3 threads, ~64 MiB resident, two threads
# spun for 8 s), meter.report_interval=1. The OAP's meter receiver and its rules
# (scripts/oap/config/meter-analyzer-config/: python-runtime, the file a stock OAP loads for the
# instance_pvm_* meters, and swagent) make of them the instance metrics
#   meter_instance_pvm_thread_active_count      = /proc/PID/status Threads (3; 5 while spinning)
#   meter_instance_pvm_total_mem_utilization    = /proc/meminfo's memory in use, +- 10 points
#   meter_instance_pvm_process_mem_utilization  = 1 (RSS / MemTotal is a fraction, as the
#                                                 Python agent sends it; OAP keeps integers and
#                                                 makes any value in (0, 1) a 1)
#   meter_instance_pvm_process_cpu_utilization  >= 2 in a minute of the spin, <= 100 x cores
#   meter_instance_pvm_total_cpu_utilization    in 0..100
#   meter_swagent_segments_sent / _committed    the segments of the requests (per minute)
#   meter_swagent_segments_dropped              0; meter_swagent_ring_fill in 0..100
# and the OAP logs no WARN or ERROR while taking them.
E2E_NAME=oap_meters
. "$E2E_DIR/lib.sh"
. "$OAP_DIR/lib_oap.sh"
e2e_init
write_config 'meter.report_interval=1'
oap_start

# The meter tests' server (tests/e2e/meter_server.py): 3 threads, ~64 MiB, GET /spin?s=N.
start_server srv traced oap-meters python3 -u "$E2E_DIR/meter_server.py"
SRV=$PORT SRV_PID=$LAST_PID
req() { curl -sSf -o /dev/null "http://127.0.0.1:$SRV/$1" || fail "request /$1"; }
for i in 1 2 3; do req "r$i"; done
# Two meter reports taken by the OAP (or its answer that it has no meter service).
wait_for "grep -q -e '^meters=unimplemented' -e '^meters=on interval_s=1 reports=\([2-9]\|[1-9][0-9]\)' \
    '$T'/run/reporter-*.status" 30 || oap_fail agent "no meter report within 30 s"
grep -h '^meters=' "$T"/run/reporter-*.status
grep -q '^meters=on ' "$T"/run/reporter-*.status ||
    oap_fail OAP "the reporter's meters are not on: $(grep -h '^meters=' "$T"/run/reporter-*.status)"
# Requests after the first meter reports too, so that the segment counters grow between
# reports (the swagent rules chart their increase).
sleep 2
threads=$(awk '/^Threads:/ {print $2}' /proc/"$SRV_PID"/status)
# Two threads spun for 8 s: the CPU of a minute is the average of its reports, a busy share of
# it must show even when the spin comes late in the minute on a loaded machine.
req "spin?s=8"
req "spin?s=8"
for i in 4 5 6 7 8 9 10; do
    req "r$i"
    sleep 1
done
total_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
avail_kb=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
mem_pct=$(((total_kb - avail_kb) * 100 / total_kb))
cores=$(nproc)
echo "/proc: threads $threads, memory in use $mem_pct %, $cores cores"

DM=$(oap_duration MINUTE)
gql_until '{ listServices { id name } }' '[.listServices[].name] | index("oap-meters") != null' 60 \
    "the service oap-meters listed"
SID=$(jq -r '.listServices[] | select(.name == "oap-meters") | .id' <<<"$GQL")
gql_until "{ listInstances(duration: $DM, serviceId: \"$SID\") { name attributes { name value } } }" \
    '.listInstances | length == 1' 30 "oap-meters' instance listed"
INST=$(jq -r '.listInstances[0].name' <<<"$GQL")
ENT="serviceName: \"oap-meters\", normal: true, serviceInstanceName: \"$INST\""

# metric NAME CONDITION WHAT: polls the metric of the instance (MQE, one value a minute) until
# CONDITION holds over $v, the minutes' values as numbers (those with data); prints them.
metric() {
    gql_until "{ execExpression(expression: \"$1\", entity: {$ENT}, duration: $DM)
        { error results { values { id value } } } }" \
        "(.execExpression.error == null) and ([.execExpression.results[]?.values[]? | .value // empty
            | tonumber] as \$v | (\$v | length) > 0 and ($2))" 60 "$1: $3"
    echo "$1: $(jq -c '[.execExpression.results[].values[] | select(.value != null) | .value]' <<<"$GQL")"
}
metric meter_instance_pvm_thread_active_count "all(\$v[]; . >= $threads and . <= $threads + 2)" \
    "the server's threads ($threads; two more while spinning)"
metric meter_instance_pvm_total_mem_utilization "all(\$v[]; . > $mem_pct - 10 and . < $mem_pct + 10)" \
    "the machine's memory in use ($mem_pct % in /proc/meminfo)"
metric meter_instance_pvm_process_mem_utilization "all(\$v[]; . == 1)" \
    "RSS / MemTotal, a fraction in (0, 1): 1 at the OAP"
# A minute's CPU is the average of its reports: the spin's share depends on where it falls in
# the minute and on the machine's load (7 % in a run where the machine's CPU was 98 % busy), an
# idle python3 is under 1 % (1 at the OAP). At least 2 shows the spin.
metric meter_instance_pvm_process_cpu_utilization "(\$v | max) >= 2 and all(\$v[]; . >= 0 and . <= 100 * $cores)" \
    "the server's CPU (two threads spun for 8 s)"
metric meter_instance_pvm_total_cpu_utilization "all(\$v[]; . >= 0 and . <= 100) and (\$v | max) > 0" \
    "the machine's CPU in use"
metric meter_swagent_segments_committed "(\$v | add) >= 1" "segments committed per minute"
metric meter_swagent_segments_sent "(\$v | add) >= 1" "segments sent per minute"
metric meter_swagent_segments_dropped "all(\$v[]; . == 0)" "no segment dropped"
metric meter_swagent_ring_fill "all(\$v[]; . >= 0 and . <= 100)" "the ring's fill, in percent"
oap_log_check
echo "ok oap_meters"
