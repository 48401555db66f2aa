#!/usr/bin/env bash
# install.sh - `cmake --install BUILD --prefix T` into a temp prefix, then a traced
# curl -> python3 -m http.server chain using ONLY the installed files: the installed `swagent`
# launcher finds the installed libswagent.so, the library reads the agent.config installed
# beside it (proved by a default service name edited in that file) and starts the installed
# swagent-reporter from ../bin; the installed collector-stub receives both segments, joined.
E2E_NAME=install
. "$E2E_DIR/lib.sh"
e2e_init
P=$T/prefix
cmake --install "$BUILD_DIR" --prefix "$P" >"$T/install.out" 2>&1 || fail "cmake --install failed: $(cat "$T/install.out")"
for f in bin/swagent bin/swagent-reporter bin/collector-stub; do
    [ -x "$P/$f" ] || fail "not installed: $f"
done
LIB=$(find "$P" -name libswagent.so | head -n 1)
[ -n "$LIB" ] || fail "libswagent.so not installed"
CONF=$(dirname "$LIB")/agent.config
[ -f "$CONF" ] || fail "agent.config not installed beside libswagent.so"
# The installed file's own default service name, to see that the library reads it.
sed -i 's/^agent.service_name=.*/agent.service_name=${SW_AGENT_NAME:installed-default}/' "$CONF"
grep -q installed-default "$CONF" || fail "cannot edit $CONF"

# Nothing of the build tree from here on: no SW_AGENT_CONFIG, no SWAGENT_LIB, no reporter path.
# The installed file's placeholders take the runtime dir and timings from the environment.
unset SW_AGENT_CONFIG SWAGENT_LIB SWAGENT_REPORTER COLLECTOR_STUB SW_AGENT_REPORTER_PATH
export SW_AGENT_RUNTIME_DIR=$T/run SW_AGENT_REPORTER_IDLE_EXIT=3 SW_AGENT_COLLECTOR_HEARTBEAT_PERIOD=1
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
"$P/bin/collector-stub" --listen 127.0.0.1:0 --port-file "$T/stub.port" --segments "$T/seg.json" \
    --management "$T/mgmt.json" 2>"$T/stub.err" &
PIDS="$PIDS $!"
wait_for "[ -s '$T/stub.port' ]" 10 || fail "installed collector-stub did not start"
COLLECTOR=127.0.0.1:$(cat "$T/stub.port")
mkdir "$T/www"
echo installed >"$T/www/i.txt"
start_server py "$P/bin/swagent" run --collector "$COLLECTOR" -- python3 -u -m http.server 0 \
    --bind 127.0.0.1 --directory "$T/www"
PY=$PORT
body=$("$P/bin/swagent" run --service inst-curl --collector "$COLLECTOR" -- curl -sS "http://127.0.0.1:$PY/i.txt") ||
    fail "curl under the installed launcher failed"
[ "$body" = installed ] || fail "body: $body"
wait_segments 2
T_END=$(now_ms)
check 'length == 2' "two segments"
check "$JQDEFS"' (seg("inst-curl") | length) == 1 and (seg("installed-default") | length) == 1
    and links(seg("installed-default")[0]; seg("inst-curl")[0]; seg("inst-curl")[0].spans[0])' \
    "joined segments; the server named by the installed agent.config"
# The reporter that shipped them is the installed one.
rp=$(sed -n 's/.*reporter [0-9.]* started: pid \([0-9]*\),.*/\1/p' "$T/run/swagent-reporter.log" | head -n 1)
[ -n "$rp" ] || fail "no reporter started"
exe=$(readlink "/proc/$rp/exe" 2>/dev/null)
[ "$exe" = "$P/bin/swagent-reporter" ] || fail "reporter is '$exe', not the installed one"
tr '\0' '\n' <"/proc/$LAST_PID/environ" | grep -qx "LD_PRELOAD=$(readlink -f "$LIB")" ||
    fail "server's LD_PRELOAD is not the installed library: $(tr '\0' '\n' <"/proc/$LAST_PID/environ" | grep LD_PRELOAD)"
echo "ok install"
