#!/usr/bin/env bash
# config.sh - agent.config keys seen end to end:
#  - agent.ignore_suffix: a .png request (traced curl -> traced server) makes no segment on
#    either side, while a .txt request made next does;
#  - plugin.http.include_http_headers: the http.headers tag (`name=[value]` lines) on both the
#    exit and the entry span, only for the listed headers;
#  - agent.service_name / agent.instance_name from the file: in every segment, in the refs and
#    in the management stream (reportInstanceProperties with language, Process No. = the
#    server's pid, and keepAlive);
#  - `swagent status` while the traced server runs: the reporter running, the server's ring
#    live with its service and instance, sent/delivered counts;
#  - swagent.reporter_nice=7 with swagent.reporter_sched_idle=false: every thread of the
#    reporter (gRPC's included) runs at nice 7 (or at the test's own, if that is already higher)
#    under the normal policy (basic.sh checks the defaults: SCHED_IDLE, nice 10).
E2E_NAME=config
. "$E2E_DIR/lib.sh"
e2e_init
start_stub
mkdir "$T/www"
echo text >"$T/www/a.txt"
printf '\x89PNG fake' >"$T/www/pic.png"
# Per-process files: a config for the server and one for the client.
write_config 'agent.service_name=cfg-server' 'agent.instance_name=cfg-server-1' \
    'plugin.http.include_http_headers=X-E2E-Token,user-agent' 'agent.ignore_suffix=.png,.gif' \
    'swagent.reporter_nice=7' 'swagent.reporter_sched_idle=false'
cp "$T/agent.config" "$T/server.config"
write_config 'agent.service_name=cfg-client' 'agent.instance_name=cfg-client-1' \
    'plugin.http.include_http_headers=x-e2e-token' 'agent.ignore_suffix=.png' \
    'swagent.reporter_nice=7' 'swagent.reporter_sched_idle=false'
cp "$T/agent.config" "$T/client.config"
unset SW_AGENT_NAME
start_server py env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_CONFIG="$T/server.config" \
    python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/www"
PY=$PORT PY_PID=$LAST_PID
cl() { env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_CONFIG="$T/client.config" "$@"; }

cl curl -sSf -o /dev/null "http://127.0.0.1:$PY/pic.png" || fail "png request failed"
cl curl -sSf -o /dev/null -H 'X-E2E-Token: tok-1' -H 'X-Other: no' -A 'e2e-agent/1.0' \
    "http://127.0.0.1:$PY/a.txt" || fail "txt request failed"
wait_segments 2
T_END=$(now_ms)
check 'length == 2' "the .png request made no segment, the .txt request two"
check "$JQDEFS"' all($s[]; .spans[0].operationName == "GET:/a.txt")' "only the .txt request traced"
check "$JQDEFS"' seg("cfg-client") | length == 1 and .[0].serviceInstance == "cfg-client-1"
    and (.[0].spans[0] | tag("http.headers")) == "x-e2e-token=[tok-1]"' \
    "client: names from the file, http.headers with the listed header only"
check "$JQDEFS"' seg("cfg-server") | length == 1 and .[0].serviceInstance == "cfg-server-1"
    and (.[0].spans[0] | tag("http.headers") | split("\n") | sort) == ["user-agent=[e2e-agent/1.0]", "x-e2e-token=[tok-1]"]
    and (.[0].spans[0].refs[0] | .parentService == "cfg-client" and .parentServiceInstance == "cfg-client-1")' \
    "server: names from the file, http.headers, ref names"

# swagent status while the server runs.
wait_for "\"$SWAGENT_CLI\" status --config \"$T/server.config\" 2>&1 | grep -q 'pid $PY_PID live service=cfg-server instance=cfg-server-1 .*delivered=1 '" 10 ||
    fail "swagent status: $("$SWAGENT_CLI" status --config "$T/server.config" 2>&1)"
"$SWAGENT_CLI" status --config "$T/server.config" >"$T/status.out" 2>&1 || fail "swagent status failed"
grep -q "^runtime dir: $T/run\$" "$T/status.out" || fail "status runtime dir: $(cat "$T/status.out")"
grep -q "reporter-127.0.0.1_${COLLECTOR#*:}: running" "$T/status.out" || fail "status reporter: $(cat "$T/status.out")"
grep -q "sent=2 " "$T/status.out" || fail "status sent count: $(cat "$T/status.out")"

# The reporter (started by whichever traced process came first: both configs say 7) lowered
# its priority.
REP_PID=$(reporter_pid)
[ -n "$REP_PID" ] && [ -d "/proc/$REP_PID" ] || fail "no reporter pid in: $(cat "$T/status.out")"
WANT=$(stat_nice /proc/self/stat)
[ "$WANT" -lt 7 ] && WANT=7
check_reporter_sched "$REP_PID" 0 "$WANT"

# Management stream: properties (language, Process No.) and keepAlive for the server.
wait_for "grep -q '\"keepAlive\",\"service\":\"cfg-server\"' '$T/mgmt.json'" 10 || fail "no keepAlive"
check '[.[] | select(.method == "reportInstanceProperties" and .service == "cfg-server")] | length >= 1
    and all(.[] | select(.method == "reportInstanceProperties" and .service == "cfg-server");
        .serviceInstance == "cfg-server-1"
        and ([.properties[] | select(.key == "language" and .value == "native")] | length) == 1
        and ([.properties[] | select(.key == "Process No." and .value == "'"$PY_PID"'")] | length) == 1
        and ([.properties[] | select(.key == "hostname" and (.value | length) > 0)] | length) == 1)' \
    "reportInstanceProperties of the server" "$T/mgmt.json"
check 'all(.[] | select((.service == "cfg-server" or .service == "cfg-client")
            and .method != "fetchConfigurations"); # CDS names the service only
        .serviceInstance == (.service + "-1"))' "management instance names" "$T/mgmt.json"
echo "ok config"
