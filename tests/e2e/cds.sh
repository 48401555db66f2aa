#!/usr/bin/env bash
# cds.sh - sampling set from OAP (CDS, issue 38 item 3), with collector-stub --cds serving the
# answers and collector.get_agent_dynamic_config_interval=1 (agent.config samples everything):
#  1. no key in OAP: 12 requests in one window -> 12 segments;
#  2. OAP sets agent.sample_n_per_3_secs=1: the traced server (no restart) follows within one
#     interval: 12 requests in one window -> 1 segment;
#  3. the key removed in OAP: back to agent.config's value (all): 12 -> 12; OAP's
#     agent.ignore_suffix=.txt,.zip: 12 requests for a .txt -> 0 segments, removed -> 12;
#  4. bad answers change nothing and are logged: a value out of range, a value not a number,
#     an unknown key, an agent.ignore_suffix of 40 entries, an answer that is not protobuf;
#     12 -> 12 after each;
#  5. `swagent status` says where the sampling values come from (the file's line, the
#     environment, OAP's answer).
E2E_NAME=cds
. "$E2E_DIR/lib.sh"
e2e_init
write_config 'collector.get_agent_dynamic_config_interval=1'
: >"$T/cds.conf"
STUB_ARGS="--cds $T/cds.conf" start_stub
mkdir "$T/www"
echo ok >"$T/www/x.txt"
start_server py traced e2e-cds python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/www"
PY=$PORT
RLOG=$T/run/swagent-reporter.log

# burst N WANT: N requests in one window; exactly WANT segments must arrive for them.
burst() {
    local n
    burst_window "$PY" "$1" /x.txt
    wait_segments "$2" 20
    sleep 1.5
    n=$(($(lines "$T/seg.json") - SEG_FROM))
    [ "$n" = "$2" ] || fail "$3: $n segments for $1 requests, want $2"
    echo "ok: $3 ($n of $1)"
}

# set_cds LINES...: the stub's answer from now on; waits (bounded) for the reporter to apply it
# (when APPLIED is a pattern of its log) and says how long that took.
applied_count() { grep -c "cds: service e2e-cds: configuration" "$RLOG" 2>/dev/null || echo 0; }
set_cds() {
    local before t0 t1
    before=$(applied_count)
    t0=$(now_ms)
    printf '%s\n' "$@" >"$T/cds.conf.new" && mv "$T/cds.conf.new" "$T/cds.conf"
    wait_for "[ \$(applied_count) -gt $before ]" 10 || fail "the reporter did not apply: $*"
    t1=$(now_ms)
    echo "applied after $((t1 - t0)) ms: $*"
    # One interval (1 s) plus the reporter's pass (<= 200 ms) and the call.
    [ $((t1 - t0)) -le 2500 ] || fail "applied only after $((t1 - t0)) ms (interval 1 s)"
}

# The reporter starts with the first segment; it asks OAP once it knows the service.
burst 12 12 "no key in OAP: all sampled"
wait_for "grep -q 'cds: service e2e-cds: configuration' '$RLOG'" 10 || fail "no CDS answer applied"

set_cds 'agent.sample_n_per_3_secs=1'
burst 12 1 "OAP's agent.sample_n_per_3_secs=1"
grep -q 'svc: configuration from OAP.*agent.sample_n_per_3_secs=1 (OAP)' "$T"/run/swagent*.log ||
    grep -rq 'agent.sample_n_per_3_secs=1 (OAP)' "$T/run" || fail "the traced process did not log the change"

# swagent status: the values in force and where they come from (issue 38 item 6).
"$SWAGENT_CLI" status --config "$T/agent.config" >"$T/status.out" 2>&1 || fail "swagent status failed"
grep -q "sampling (this environment): agent.sample_n_per_3_secs=-1 (every trace; file $T/agent.config:3)" "$T/status.out" ||
    fail "status: the file's value and its line: $(cat "$T/status.out")"
grep -A1 'service=e2e-cds instance=' "$T/status.out" | grep -q 'agent.sample_n_per_3_secs: 1 (OAP)' ||
    fail "status: OAP's value: $(cat "$T/status.out")"
grep -q 'OAP answer [0-9a-f]\{128\}, applied [0-9]* s ago, last asked [0-9]* s ago' "$T/status.out" ||
    fail "status: OAP's answer: $(cat "$T/status.out")"
SW_AGENT_SAMPLE=5 "$SWAGENT_CLI" status --config "$T/agent.config" >"$T/status5.out" 2>&1
grep -q 'agent.sample_n_per_3_secs=5 (per 3 s per service; env, through a ${...} of' "$T/status5.out" ||
    fail "status: env through the file: $(head -5 "$T/status5.out")"

set_cds '# the key removed'
burst 12 12 "key removed: back to agent.config (all)"
"$SWAGENT_CLI" status --config "$T/agent.config" >"$T/status.out" 2>&1
grep -A1 'service=e2e-cds instance=' "$T/status.out" | grep -q 'agent.sample_n_per_3_secs: agent.config of each process (-1 here)' ||
    fail "status after the key was removed: $(cat "$T/status.out")"

# agent.ignore_suffix from OAP: .txt starts no trace; removed, the file's list again.
set_cds 'agent.ignore_suffix=.txt,.zip'
burst 12 0 "OAP's agent.ignore_suffix=.txt,.zip"
set_cds '# removed'
burst 12 12 "agent.ignore_suffix removed: agent.config's list (no .txt)"

set_cds 'agent.sample_n_per_3_secs=1'
burst 12 1 "set again"
# Bad values keep what the key had (here OAP's 1); an unknown key is ignored.
set_cds 'agent.sample_n_per_3_secs=99999999999' 'agent.unknown_key=1'
grep -q 'not an integer for agent.sample_n_per_3_secs\|out of range for agent.sample_n_per_3_secs' "$RLOG" ||
    fail "the huge value was not logged"
grep -q 'OAP sets agent.unknown_key, which swagent cannot change at runtime' "$RLOG" ||
    fail "the unknown key was not logged"
burst 12 1 "huge value ignored: the key keeps OAP's 1"
set_cds '# removed' && burst 12 12 "removed again: all"

set_cds 'agent.sample_n_per_3_secs=two' "agent.ignore_suffix=$(seq -s, 1 40 | sed 's/[0-9]*/.x&/g')"
grep -q 'not an integer for agent.sample_n_per_3_secs: "two"' "$RLOG" || fail "'two' was not logged"
grep -q 'too many entries (max 32) in agent.ignore_suffix' "$RLOG" || fail "the long list was not logged"
burst 12 12 "bad values: agent.config's values stay"

before=$(grep -c 'does not parse as Commands' "$RLOG")
printf '!garbage\n' >"$T/cds.conf"
wait_for "[ \$(grep -c 'does not parse as Commands' '$RLOG') -gt $before ]" 10 || fail "garbage answer not logged"
burst 12 12 "garbage answer: nothing changes"
echo "ok cds"
