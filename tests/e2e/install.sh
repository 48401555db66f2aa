#!/usr/bin/env bash
# install.sh - `cmake --install BUILD --prefix T` into a temp prefix, then traced programs using
# ONLY the installed files:
#  - the layout: agent.config in <prefix>/etc/swagent (not beside the library);
#  - the installed config reaches the reporter (issue 33): `agent.authentication=
#    ${SW_AGENT_AUTHENTICATION:s3cret}` in it and collector-stub --auth s3cret: a traced
#    curl -> python3 -m http.server chain under the installed `swagent run` arrives, joined
#    (before, the reporter never read that file and every batch was refused); the server is
#    named by a default service name edited in the same file; the installed swagent-reporter
#    (from ../bin) is the one started, and its status names the file and `auth=on`;
#  - a reporter-only key of that file (swagent.grpc_gzip=false) reaches the reporter too;
#  - `swagent status` reads the same file (from the library's directory);
#  - a process whose token differs (SW_AGENT_AUTHENTICATION=wrong) is never served by the
#    right token's reporter: it gets its own, which logs the other one, `swagent status` warns
#    of two reporters with different settings, and its segment is not delivered (refused,
#    spooled, shown in the status as undelivered);
#  - `swagent reporter` in the foreground, started from the installed bin/, reads the same
#    file: a traced curl's segment goes through it with the token.
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
CONF=$P/etc/swagent/agent.config
[ -f "$CONF" ] || fail "agent.config not installed in <prefix>/etc/swagent: $(find "$P" -name agent.config)"
[ ! -e "$(dirname "$LIB")/agent.config" ] || fail "agent.config still installed beside libswagent.so"
# The installed file's own default service name and token, to see that both readers read it.
# A reporter-only key as well (the issue: gzip, batch, spool and heartbeat keys of the file
# never reached the reporter either).
sed -i 's/^agent.service_name=.*/agent.service_name=${SW_AGENT_NAME:installed-default}/;
        s/^agent.authentication=.*/agent.authentication=${SW_AGENT_AUTHENTICATION:s3cret}/;
        s/^swagent.grpc_gzip=.*/swagent.grpc_gzip=${SW_AGENT_GRPC_GZIP:false}/' "$CONF"
grep -q installed-default "$CONF" && grep -q 'SW_AGENT_AUTHENTICATION:s3cret' "$CONF" &&
    grep -q 'SW_AGENT_GRPC_GZIP:false' "$CONF" || fail "cannot edit $CONF"

# Nothing of the build tree from here on: no SW_AGENT_CONFIG, no SWAGENT_LIB, no reporter path.
# The installed file's placeholders take the runtime dir and timings from the environment.
unset SW_AGENT_CONFIG SWAGENT_LIB SWAGENT_REPORTER COLLECTOR_STUB SW_AGENT_REPORTER_PATH
export SW_AGENT_RUNTIME_DIR=$T/run SW_AGENT_REPORTER_IDLE_EXIT=3 SW_AGENT_COLLECTOR_HEARTBEAT_PERIOD=1
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
"$P/bin/collector-stub" --listen 127.0.0.1:0 --port-file "$T/stub.port" --segments "$T/seg.json" \
    --management "$T/mgmt.json" --auth s3cret 2>"$T/stub.err" &
PIDS="$PIDS $!"
wait_for "[ -s '$T/stub.port' ]" 10 || fail "installed collector-stub did not start"
COLLECTOR=127.0.0.1:$(cat "$T/stub.port")
mkdir "$T/www"
echo installed >"$T/www/i.txt"
start_server py "$P/bin/swagent" run --collector "$COLLECTOR" -- python3 -u -m http.server 0 \
    --bind 127.0.0.1 --directory "$T/www"
PY=$PORT PY_PID=$LAST_PID
body=$("$P/bin/swagent" run --service inst-curl --collector "$COLLECTOR" -- curl -sS "http://127.0.0.1:$PY/i.txt") ||
    fail "curl under the installed launcher failed"
[ "$body" = installed ] || fail "body: $body"
wait_segments 2
T_END=$(now_ms)
check 'length == 2' "two segments, accepted with the installed file's token"
check "$JQDEFS"' (seg("inst-curl") | length) == 1 and (seg("installed-default") | length) == 1
    and links(seg("installed-default")[0]; seg("inst-curl")[0]; seg("inst-curl")[0].spans[0])' \
    "joined segments; the server named by the installed agent.config"
# The reporter that shipped them is the installed one, and says which file it read.
rlog=$T/run/swagent-reporter.log
rp=$(sed -n 's/.*reporter [0-9.]* started: pid \([0-9]*\),.*/\1/p' "$rlog" | head -n 1)
[ -n "$rp" ] || fail "no reporter started"
exe=$(readlink "/proc/$rp/exe" 2>/dev/null)
[ "$exe" = "$P/bin/swagent-reporter" ] || fail "reporter is '$exe', not the installed one"
tr '\0' '\n' <"/proc/$PY_PID/environ" | grep -qx "LD_PRELOAD=$(readlink -f "$LIB")" ||
    fail "server's LD_PRELOAD is not the installed library: $(tr '\0' '\n' <"/proc/$PY_PID/environ" | grep LD_PRELOAD)"
# is_conf FILE: FILE names the installed agent.config (the library finds it as lib/../etc/...).
is_conf() { [ -n "$1" ] && [ "$(readlink -f "$1")" = "$(readlink -f "$CONF")" ]; }
is_conf "$(sed -n 's/.*reporter: configuration \(.*\); authentication on.*/\1/p' "$rlog" | head -n 1)" ||
    fail "the reporter does not say it read $CONF with a token"
grep -q "reporter: channel to $COLLECTOR (gzip off, tls off, auth on" "$rlog" ||
    fail "the reporter did not take swagent.grpc_gzip from $CONF"
! grep -q 'arrived gzip-compressed' "$T/stub.err" || fail "gzip-compressed messages arrived"
"$P/bin/swagent" status >"$T/status1.out" 2>&1 || fail "swagent status failed"
is_conf "$(sed -n 's/^config: \(.*\) (library dir .*/\1/p' "$T/status1.out")" ||
    fail "swagent status does not read $CONF: $(head -3 "$T/status1.out")"
is_conf "$(sed -n "s/^ *config=\(.*\) settings=[0-9a-f]\{8\} auth=on tls=off key=$COLLECTOR+[0-9a-f]\{8\}\$/\1/p" "$T/status1.out")" ||
    fail "the reporter's status does not name $CONF with auth=on: $(cat "$T/status1.out")"

# A process configured with another token: its own reporter, never the first one's token.
SEG_FROM=2
SW_AGENT_AUTHENTICATION=wrong "$P/bin/swagent" run --service inst-wrong --collector "$COLLECTOR" -- \
    curl -sS -o /dev/null "http://127.0.0.1:$PY/i.txt" || fail "curl with the other token failed"
wait_segments 1 # the server's entry span (the right token), not the client's
check "$JQDEFS"' length == 1 and (seg("inst-wrong") | length) == 0' \
    "only the server's segment arrived; the other token's client was not sent with ours"
wait_for "grep -q 'another reporter (reporter-127.0.0.1_[0-9]*+[0-9a-f]*.lock) sends to $COLLECTOR with other authentication/TLS settings' '$rlog'" 10 ||
    fail "the second reporter does not log the first"
wait_for "grep -q 'status 7' '$rlog'" 10 || fail "the other token was not refused"
"$P/bin/swagent" status >"$T/status2.out" 2>&1 || fail "swagent status failed"
grep -q "^warning: 2 reporters send to $COLLECTOR with different authentication/TLS settings" \
    "$T/status2.out" || fail "swagent status does not warn of two settings: $(cat "$T/status2.out")"
# Its reporter leaves once idle (the collector refuses it); the segment waits in its spool.
wait_for "grep -q 'exiting: 1 segment(s) in 1 spool file(s)' '$rlog'" 20 ||
    fail "the other token's reporter did not leave with its segment spooled"
"$P/bin/swagent" status >"$T/status3.out" 2>&1 || fail "swagent status failed"
grep -q "^  127.0.0.1_[0-9]*+[0-9a-f]\{8\}: 1 file(s), [0-9]* bytes, 1 segment(s) not delivered yet" \
    "$T/status3.out" || fail "swagent status does not show the undelivered segment: $(cat "$T/status3.out")"

# The server stops; its reporter leaves. `swagent reporter` from the installed bin/ then reads
# the same file: a traced curl's segment goes through it, with the token.
kill "$PY_PID"
wait_for "! kill -0 $rp 2>/dev/null" 20 || fail "the first reporter did not leave"
SW_AGENT_COLLECTOR_BACKEND_SERVICES=$COLLECTOR "$P/bin/swagent" reporter --idle-exit 30 2>"$T/fg.err" &
FG=$!
PIDS="$PIDS $FG"
wait_for "grep -q 'swagent-reporter: pid $FG' '$T/fg.err'" 10 || fail "swagent reporter did not start: $(cat "$T/fg.err")"
SEG_FROM=3
python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/www" >"$T/plain.out" 2>&1 &
PIDS="$PIDS $!"
wait_for "grep -q 'port [0-9]' '$T/plain.out'" 10 || fail "untraced server did not start"
PL=$(sed -n 's/^Serving HTTP on .* port \([0-9]*\) .*/\1/p' "$T/plain.out")
"$P/bin/swagent" run --service inst-fg --collector "$COLLECTOR" -- \
    curl -sS -o /dev/null "http://127.0.0.1:$PL/i.txt" || fail "curl failed"
wait_segments 1
check "$JQDEFS"' length == 1 and (seg("inst-fg") | length) == 1' "sent by the foreground reporter"
"$P/bin/swagent" status >"$T/status4.out" 2>&1 || fail "swagent status failed"
grep -A3 "^ *pid=$FG collector=$COLLECTOR " "$T/status4.out" | grep -q '^ *sent=1 ' ||
    fail "the segment did not go through the foreground reporter: $(cat "$T/status4.out")"
is_conf "$(sed -n "/swagent\[$FG\]: reporter: configuration/s/.*reporter: configuration \(.*\); authentication on.*/\1/p" "$T/run/swagent-reporter.log")" ||
    fail "swagent reporter did not read $CONF"
# The installed file itself draws no configuration warning (no refused or unknown key in it).
! grep -hE 'WARN swagent\[[0-9]+\]: config[ :]' "$T/run/swagent.log" "$T/run/swagent-reporter.log" ||
    fail "the installed agent.config draws warnings"
echo "ok install"
