#!/usr/bin/env bash
# oap_cds.sh - sampling set from a real SkyWalking OAP 10.1.0 (CDS, issue 38 item 3): the OAP's
# ConfigurationDiscoveryService answers from its dynamic configuration, here its `grpc`
# configuration centre (scripts/oap/config/application.yml: SW_CONFIGURATION=grpc, polled every
# SW_DCS_PERIOD=1 s), served by tests/oap/dcs_server.py, a peer implementing the OAP's published
# configuration-service.proto. The key is configuration-discovery.default.agentConfigurations,
# whose value is the YAML `configurations: {<service>: {<agent key>: <value>}}`.
# The traced python3 http.server (oap-cds; agent.config samples everything) asks the OAP every
# collector.get_agent_dynamic_config_interval=1 s:
#  1. no configuration: 12 requests in one 3 s window -> 12 segments sent, 12 traces at the OAP;
#  2. agentConfigurations sets agent.sample_n_per_3_secs=1 for oap-cds: the reporter applies it
#     within the OAP's period plus one interval (bound 5 s, time printed); 12 requests in one
#     window -> 1 segment, 1 more trace at the OAP;
#  3. the value unset (the key with an empty value: how the protocol removes one): back to
#     agent.config (all) within the same bound; 12 -> 12.
E2E_NAME=oap_cds
. "$E2E_DIR/lib.sh"
. "$OAP_DIR/lib_oap.sh"
PY3=/usr/bin/python3 # Debian's, with python3-grpcio
e2e_init
write_config 'collector.get_agent_dynamic_config_interval=1'
KEY=configuration-discovery.default.agentConfigurations
# The configuration server, before the OAP (which polls it from its start).
echo '{}' >"$T/dcs.json"
$PY3 -c 'import grpc' 2>/dev/null || fail "python3-grpcio is not installed (scripts/deps.sh)"
start_server dcs $PY3 -u "$OAP_DIR/dcs_server.py" "$T/dcs.json"
DCS=$PORT
OAP_SET=(SW_CONFIGURATION=grpc "SW_DCS_SERVER_PORT=$DCS" SW_DCS_PERIOD=1)
oap_prepare
oap_up
wait_for "grep -q '^call' '$T/dcs.out'" 10 || oap_fail OAP "the OAP did not call the configuration server"

mkdir "$T/www"
echo ok >"$T/www/x.txt"
start_server py traced oap-cds python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/www"
PY=$PORT
RLOG=$T/run/swagent-reporter.log

# traces_at_oap: how many traces of oap-cds the OAP lists (one segment each: curl is not traced).
SID=""
traces_at_oap() {
    [ -n "$SID" ] ||
        SID=$(gql '{ listServices { id name } }' | jq -r '.listServices[] | select(.name == "oap-cds") | .id')
    [ -n "$SID" ] || { echo 0; return; }
    gql "{ queryBasicTraces(condition: {serviceId: \"$SID\", queryDuration: $(oap_duration SECOND), traceState: ALL,
        queryOrder: BY_START_TIME, paging: {pageNum: 1, pageSize: 100}}) { traces { segmentId } } }" |
        jq '.queryBasicTraces.traces | length'
}
TRACES=0
# burst N WANT WHAT: N requests in one window: WANT segments sent by the reporter, and WANT more
# traces at the OAP.
burst() {
    local before n
    before=$(reporter_count sent)
    burst_window "$PY" "$1" /x.txt
    wait_for "[ \$(reporter_count sent) -ge $((before + $2)) ]" 20 ||
        oap_fail agent "$3: $(($(reporter_count sent) - before)) of $2 segments sent"
    sleep 1.5
    n=$(($(reporter_count sent) - before))
    [ "$n" = "$2" ] || oap_fail agent "$3: $n segments sent for $1 requests, want $2"
    TRACES=$((TRACES + $2))
    wait_for "[ \"\$(traces_at_oap)\" -ge $TRACES ]" 30 ||
        oap_fail OAP "$3: the OAP lists $(traces_at_oap) traces of oap-cds, want $TRACES"
    [ "$(traces_at_oap)" = "$TRACES" ] || oap_fail OAP "$3: the OAP lists $(traces_at_oap) traces, want $TRACES"
    echo "ok: $3 ($n of $1; $TRACES traces at the OAP)"
}

# set_dcs 'YAML' 'PATTERN': the configuration server's table from now on: the key with that value
# (empty: the protocol's way to unset a value; a key left out of the table keeps its value at
# the OAP, configuration-service.proto); waits for the reporter to log PATTERN (an applied answer) and says how long it took.
applied() { grep -c "cds: service oap-cds: configuration .* applied: agent.sample_n_per_3_secs $1" "$RLOG" 2>/dev/null; }
set_dcs() {
    local before t0 t1
    before=$(applied "$2")
    t0=$(now_ms)
    jq -n --arg k "$KEY" --arg v "$1" '{($k): $v}' >"$T/dcs.json.new"
    mv "$T/dcs.json.new" "$T/dcs.json"
    wait_for "[ \$(applied '$2') -gt $before ]" 20 ||
        oap_fail OAP "the reporter did not apply '$2' within 20 s: $(grep 'cds:' "$RLOG" | tail -n 3)"
    t1=$(now_ms)
    echo "applied after $((t1 - t0)) ms: agent.sample_n_per_3_secs $2"
    # The OAP's poll (1 s), the reporter's (1 s), their calls, and a loaded machine's slack.
    [ $((t1 - t0)) -le 5000 ] || oap_fail OAP "applied only after $((t1 - t0)) ms (OAP period 1 s + interval 1 s)"
}

burst 12 12 "no configuration at the OAP: all sampled"
wait_for "grep -q 'cds: service oap-cds: configuration .* applied' '$RLOG'" 10 ||
    oap_fail OAP "no CDS answer from the OAP applied: $(grep 'cds:' "$RLOG" | tail -n 3)"

set_dcs 'configurations:
  oap-cds:
    agent.sample_n_per_3_secs: 1' '= 1 (OAP)'
burst 12 1 "the OAP's agent.sample_n_per_3_secs=1"
set_dcs '' 'from agent.config'
burst 12 12 "the configuration unset at the OAP: agent.config's value (all) again"
tail -n 3 "$T/dcs.out"
oap_log_check
echo "ok oap_cds"
