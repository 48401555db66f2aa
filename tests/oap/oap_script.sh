#!/usr/bin/env bash
# oap_script.sh - scripts/oap.sh's own behaviour, with a real OAP: bad options (and a --set that
# would move a listener off loopback) are refused, a
# port in use is refused before anything starts, `wait` bounded by --timeout says the OAP did
# not answer in time and shows the log's tail, an OAP that dies at start-up (a storage that
# does not exist) is reported as exited with its log's tail, and start / wait / status / a second
# start / stop do what they say, by pid, leaving no process behind.
E2E_NAME=oap_script
. "$E2E_DIR/lib.sh"
. "$OAP_DIR/lib_oap.sh"
e2e_init
oap_fetch
trap oap_cleanup EXIT
OAP_STARTED=1
G=$(free_port)
H=$(free_port)
O=("$OAP_SH")

expect_err() { # WHAT REGEX CMD...: CMD fails and says REGEX on stderr
    local what=$1 re=$2 rc=0
    shift 2
    "$@" >"$T/cmd.out" 2>"$T/cmd.err" || rc=$?
    [ $rc -ne 0 ] || fail "$what: exit 0 (stderr: $(cat "$T/cmd.err"))"
    grep -q -E -e "$re" "$T/cmd.err" || fail "$what: stderr lacks /$re/: $(cat "$T/cmd.err")"
}

expect_err "bad --set" "--set wants KEY=VALUE" "${O[@]}" start --dir "$T/oap" --set lower=1
expect_err "a listener beyond loopback" "SW_CORE_REST_HOST: the OAP listens on 127.0.0.1 only" \
    "${O[@]}" start --dir "$T/oap" --set SW_CORE_REST_HOST=0.0.0.0
expect_err "bad port" "bad port/timeout '70000'" "${O[@]}" start --dir "$T/oap" --grpc-port 70000
expect_err "unknown option" "unknown option '--bogus'" "${O[@]}" status --bogus
expect_err "wait without start" "no OAP started from" "${O[@]}" wait --dir "$T/oap"

# A port in use: refused, nothing started.
python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); print("PORT", sys.argv[1], flush=True); time.sleep(60)' "$G" >"$T/busy.out" &
BUSY=$!
PIDS="$PIDS $BUSY"
wait_for "grep -q PORT '$T/busy.out'" 10 || fail "the port holder did not start"
expect_err "port in use" "127.0.0.1:$G is in use" "${O[@]}" start --dir "$T/oap" --grpc-port "$G" --http-port "$H"
[ ! -f "$T/oap/oap.pid" ] || fail "a pid file was written for a refused start"
kill "$BUSY" 2>/dev/null
wait_for "! (exec 3<>/dev/tcp/127.0.0.1/$G) 2>/dev/null" 10 || fail "the port holder did not stop"

# An OAP that dies at start-up: `wait` says it exited, with its log's tail.
"${O[@]}" start --dir "$T/bad" --grpc-port "$G" --http-port "$H" --set SW_STORAGE=nosuchstorage \
    2>/dev/null || fail "start (bad storage) failed before the JVM ran"
expect_err "dead OAP" "exited before it answered on 127.0.0.1:$H" "${O[@]}" wait --dir "$T/bad" --timeout 120
grep -q -e '(last 30 lines)' "$T/cmd.err" || fail "no log tail for the dead OAP: $(cat "$T/cmd.err")"
grep -q -e 'no provider found for module storage' "$T/cmd.err" || fail "the log tail does not name the storage's error: $(cat "$T/cmd.err")"

# Slow to start (a 1 s bound): `wait` says so, with the log's tail (or that nothing was logged
# yet); then it comes up.
"${O[@]}" start --dir "$T/oap" --grpc-port "$G" --http-port "$H" 2>/dev/null || fail "start failed"
PID=$(cat "$T/oap/oap.pid")
expect_err "1 s bound" "did not answer GraphQL on 127.0.0.1:$H within 1 s" "${O[@]}" wait --dir "$T/oap" --timeout 1
grep -q -e '(last 30 lines)' "$T/cmd.err" || fail "no log tail on a timeout: $(cat "$T/cmd.err")"
"${O[@]}" wait --dir "$T/oap" --timeout 300 2>"$T/wait.err" || fail "wait: $(cat "$T/wait.err")"
"${O[@]}" status --dir "$T/oap" >"$T/status.out" || fail "status of a running OAP: exit $?"
grep -q "^pid=$PID grpc=127.0.0.1:$G http=127.0.0.1:$H rss=\"[0-9]* kB\" version=10.1.0-" "$T/status.out" ||
    fail "status: $(cat "$T/status.out")"
expect_err "second start" "already running from $T/oap \\(pid $PID\\)" "${O[@]}" start --dir "$T/oap"
"${O[@]}" stop --dir "$T/oap" 2>/dev/null || fail "stop failed"
! kill -0 "$PID" 2>/dev/null || fail "the OAP (pid $PID) still runs after stop"
rc=0
"${O[@]}" status --dir "$T/oap" >"$T/status.out" || rc=$?
[ $rc -eq 1 ] && grep -q "no OAP running" "$T/status.out" || fail "status after stop: exit $rc, $(cat "$T/status.out")"
echo "ok oap_script"
