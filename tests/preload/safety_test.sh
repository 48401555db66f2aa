#!/bin/bash
# safety_test.sh <case> - host-safety, fork/exec and uid tests of libswagent.so with real
# programs, the real reporter and collector-stub (tests/safety.cmake).
# Environment: SWAGENT_LIB, REPORTER, STUB, HTTP_CLIENT, SAFETY_HELPER, PRELOAD_DIR.
# Everything listens on 127.0.0.1 (kernel-chosen ports), every wait is bounded, every process
# started here is stopped by its PID at exit (reporters by the pid in their log).
set -u
case_name=$1
T=$(mktemp -d /tmp/swsafety.XXXXXX) || exit 1
chmod 755 "$T" # processes that drop to `nobody` read the config and the files under it
PIDS=""
REPORTER_LOGS=""
cleanup() {
    for f in $REPORTER_LOGS "$T"/run/swagent-reporter.log; do
        [ -f "$f" ] || continue
        # Only reporters of this test's collector (other tests share nobody's directory).
        for p in $(grep -F "collector ${COLLECTOR:-none}," "$f" |
            sed -n 's/.*reporter [0-9.]* started: pid \([0-9]*\),.*/\1/p'); do
            PIDS="$PIDS $p"
        done
    done
    [ -f "$T/ngx/nginx.pid" ] && PIDS="$PIDS $(cat "$T/ngx/nginx.pid")"
    for p in $PIDS; do kill "$p" 2>/dev/null; done
    for _ in $(seq 30); do
        alive=""
        for p in $PIDS; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ -z "$alive" ] && break
        sleep 0.1
    done
    for p in $PIDS; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT INT TERM

fail() {
    echo "FAIL ($case_name): $*" >&2
    for f in "$T"/*.log "$T"/*.err "$T"/run/*.log "$T"/ngx/error.log $REPORTER_LOGS; do
        [ -f "$f" ] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }
    done
    exit 1
}

# wait_for 'shell condition' SECONDS
wait_for() {
    local n=0
    while ! eval "$1"; do
        n=$((n + 1))
        [ $n -gt $(($2 * 10)) ] && return 1
        sleep 0.1
    done
}

lines() { if [ -f "$1" ]; then wc -l <"$1" | tr -d ' '; else echo 0; fi; }

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The agent's config for every traced process of the test (readable by any uid).
write_config() { # [extra lines]
    {
        echo "collector.heartbeat_period=1"
        echo "swagent.reporter_idle_exit=3"
        echo "swagent.reporter_path=$REPORTER"
        for l in "$@"; do echo "$l"; done
    } >"$T/agent.config"
    chmod 644 "$T/agent.config"
    export SW_AGENT_CONFIG=$T/agent.config
}

start_stub() {
    "$STUB" --listen 127.0.0.1:0 --port-file "$T/stub.port" --segments "$T/seg.json" \
        --management "$T/mgmt.json" 2>"$T/stub.err" &
    PIDS="$PIDS $!"
    wait_for "[ -s '$T/stub.port' ]" 10 || fail "collector-stub did not start"
    COLLECTOR=127.0.0.1:$(cat "$T/stub.port")
    export SW_AGENT_COLLECTOR_BACKEND_SERVICES=$COLLECTOR
}

# start_server <name> <command...>: background, waits for "PORT n" / http.server's banner.
start_server() {
    local name=$1
    shift
    "$@" >"$T/$name.out" 2>"$T/$name.err" &
    PIDS="$PIDS $!"
    SERVER_PID=$!
    port=""
    wait_for "port=\$(sed -n 's/^PORT \([0-9]*\)$/\1/p; s/^Serving HTTP on .* port \([0-9]*\) .*/\1/p' '$T/$name.out' | head -n 1); [ -n \"\$port\" ]" 10 ||
        fail "$name did not start"
}

agent() { env LD_PRELOAD="$SWAGENT_LIB" "$@"; }

# Private runtime and log dirs, no reporter, and an (untraced) echo server on $port.
safety_env() {
    mkdir -m 700 -p "$T/run" "$T/log"
    : >"$T/agent.config"
    export SW_AGENT_CONFIG=$T/agent.config SW_AGENT_RUNTIME_DIR=$T/run SW_LOGGING_DIR=$T/log
    export SW_AGENT_REPORTER_PATH=/nonexistent/swagent-reporter SW_AGENT_SAMPLE=-1
    start_server echo python3 -u "$PRELOAD_DIR/echo_server.py" http 120
}

# uid_default_dir UID: that uid's default runtime directory (config.h): /dev/shm/swagent-UID when
# /dev/shm is a sticky tmpfs of at least 512 MiB (memory: rings there are not written back to
# a disk), else /tmp/swagent-UID.
uid_default_dir() {
    if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] &&
        [ "$(stat -c %a /dev/shm)" = 1777 ] &&
        [ "$(df -k --output=size /dev/shm | tail -n 1)" -ge 524288 ]; then
        echo "/dev/shm/swagent-$1"
    else
        echo "/tmp/swagent-$1"
    fi
}

# segs_of SERVICE: segments of that service in the stub's output.
segs_of() { jq -c "select(.service == \"$1\")" "$T/seg.json" 2>/dev/null; }

case $case_name in
nginx_nobody)
    # nginx started as root with its default `user nobody`: the workers fork, setuid, then make
    # their rings in the runtime directory of `nobody` and start a reporter running as nobody;
    # every request served by every worker reaches the collector.
    [ "$(id -u)" = 0 ] || { echo "SKIP: not root"; exit 77; }
    command -v nginx >/dev/null || { echo "SKIP: nginx not installed"; exit 77; }
    id nobody >/dev/null 2>&1 || { echo "SKIP: no user nobody"; exit 77; }
    nuid=$(id -u nobody)
    nobody_dir=$(uid_default_dir "$nuid")
    REPORTER_LOGS="$nobody_dir/swagent-reporter.log"
    # The root processes (master, curl) use a private explicit runtime dir; `nobody` cannot
    # use it (root's 0700 directory), nor create uid-<uid> in it, so the workers fall back to
    # their own default directory.
    mkdir -m 700 "$T/run"
    write_config "swagent.runtime_dir=$T/run" "agent.service_name=ngx-nobody"
    start_stub
    nport=$(free_port)
    mkdir -p "$T/ngx/tmp" "$T/ngx/www"
    echo small >"$T/ngx/www/small"
    chmod -R a+rX "$T/ngx"
    cat >"$T/ngx/nginx.conf" <<NGX
daemon off;
master_process on;
worker_processes 2;
# Workers keep the sanitizers' options (log_path: scripts/test.sh) for reporters they start.
env ASAN_OPTIONS; env UBSAN_OPTIONS; env TSAN_OPTIONS;
pid $T/ngx/nginx.pid;
error_log $T/ngx/error.log warn;
events { worker_connections 64; accept_mutex off; }
http {
  log_format pids '\$pid';
  access_log $T/ngx/access.log pids;
  client_body_temp_path $T/ngx/tmp; proxy_temp_path $T/ngx/tmp;
  fastcgi_temp_path $T/ngx/tmp; uwsgi_temp_path $T/ngx/tmp; scgi_temp_path $T/ngx/tmp;
  server { listen 127.0.0.1:$nport reuseport; root $T/ngx/www; }
}
NGX
    agent nginx -c "$T/ngx/nginx.conf" -p "$T/ngx" >"$T/ngx.out" 2>&1 &
    PIDS="$PIDS $!"
    wait_for "(exec 3<>/dev/tcp/127.0.0.1/$nport) 2>/dev/null" 10 || fail "nginx did not start"
    workers=$(ps -o pid= -o user= --ppid "$(cat "$T/ngx/nginx.pid")" | awk '$2 != "root" {print $1}')
    [ "$(echo "$workers" | wc -w)" = 2 ] || fail "expected 2 non-root workers, got: $workers"
    # Each request on a new connection (new source port: reuseport spreads them).
    n=0
    for i in $(seq 40); do
        curl -sf -o /dev/null "http://127.0.0.1:$nport/small?i=$i" || fail "request $i"
        n=$((n + 1))
    done
    served=$(sort -u "$T/ngx/access.log" | wc -l)
    [ "$served" = 2 ] || fail "both workers should have served requests (saw $served pids)"
    wait_for "[ \$(segs_of ngx-nobody | wc -l) -ge $n ]" 20 ||
        fail "$(segs_of ngx-nobody | wc -l) of $n nginx segments arrived"
    got=$(segs_of ngx-nobody | jq -r '.spans[] | select(.spanType == "Entry") | .tags[]? | select(.key == "url") | .value' | sort -u | wc -l)
    [ "$got" = "$n" ] || fail "$got distinct request urls of $n"
    # Every worker's ring lives in nobody's directory, owned by nobody, 0600.
    for w in $workers; do
        f=$(ls "$nobody_dir"/ring-"$w"-*.swr 2>/dev/null | head -n 1)
        [ -n "$f" ] || fail "no ring of worker $w in $nobody_dir"
        [ "$(stat -c '%U %a' "$f")" = "nobody 600" ] || fail "ring $f: $(stat -c '%U %a' "$f")"
    done
    [ "$(stat -c '%U %a' "$nobody_dir")" = "nobody 700" ] || fail "$nobody_dir mode"
    # A reporter runs as nobody for this collector; the root runtime dir holds no worker ring.
    pgrep -u nobody -f "swagent-reporter.*$COLLECTOR" >/dev/null || fail "no reporter running as nobody"
    for w in $workers; do
        ls "$T/run"/ring-"$w"-* >/dev/null 2>&1 && fail "worker ring in root's directory"
    done
    # With the rings in memory (/dev/shm), the reporter's spool stays on a disk: /tmp.
    case $nobody_dir in
    /dev/shm/*)
        wait_for "grep -q 'spool_dir=/tmp/swagent-$nuid/spool-' $nobody_dir/reporter-*.status" 5 ||
            fail "spool not in /tmp/swagent-$nuid: $(cat "$nobody_dir"/reporter-*.status 2>/dev/null)"
        ;;
    esac
    # The workers' log went to nobody's directory, never into root's log file.
    grep -q "uid $nuid: runtime directory $nobody_dir" "$nobody_dir/swagent.log" || fail "worker log not in $nobody_dir"
    # (The root master serves nothing, so it never logs: its log, if any, is root's.)
    [ ! -e "$T/run/swagent.log" ] || [ "$(stat -c %U "$T/run/swagent.log")" = root ] ||
        fail "root log owner"
    grep -qs "uid $nuid" "$T/run/swagent.log" && fail "a worker line in root's log"
    # nginx stops: nobody's reporter removes the workers' drained rings (in /dev/shm they are
    # memory), then leaves.
    kill "$(cat "$T/ngx/nginx.pid")"
    for w in $workers; do
        wait_for "! kill -0 $w 2>/dev/null" 10 || fail "worker $w did not exit"
    done
    for w in $workers; do
        wait_for "! ls '$nobody_dir'/ring-$w-*.swr >/dev/null 2>&1" 10 ||
            fail "the ring of exited worker $w was left in $nobody_dir"
    done
    ;;
cgi)
    # python3 -m http.server --cgi: the server forks (the child drops to nobody when root) and
    # execs a CGI shell script that calls curl; curl's exit joins the server's trace: its
    # segment starts with an Entry span EXEC:curl whose ref names the server's Exit span
    # EXEC:call.sh (opened at the fork, named by the child at exec, peer exec:call.sh, ended
    # with the server's entry), with networkAddressUsedAtPeer equal to that peer. The server's
    # entry ends at its close with the status of the status line it wrote (200).
    nuid=$(id -u nobody 2>/dev/null || echo none)
    REPORTER_LOGS="$(uid_default_dir "$nuid")/swagent-reporter.log"
    mkdir -m 700 "$T/run"
    write_config "swagent.runtime_dir=$T/run"
    start_stub
    start_server backend env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=cgi-backend \
        python3 -u "$PRELOAD_DIR/echo_server.py" http 120
    export BACKEND_PORT=$port
    mkdir -p "$T/www/cgi-bin"
    cat >"$T/www/cgi-bin/call.sh" <<'CGI'
#!/bin/sh
echo "Content-Type: text/plain"
echo
SW_AGENT_NAME=cgi-curl curl -s "http://127.0.0.1:$BACKEND_PORT/from-cgi"
CGI
    chmod -R a+rX "$T/www"
    chmod 755 "$T/www/cgi-bin/call.sh"
    (cd "$T/www" && exec env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=cgi-server \
        python3 -u -m http.server --cgi 0 --bind 127.0.0.1) >"$T/cgi.out" 2>"$T/cgi.err" &
    PIDS="$PIDS $!"
    wait_for "grep -q 'port' '$T/cgi.out'" 10 || fail "cgi server did not start"
    cport=$(sed -n 's/^Serving HTTP on .* port \([0-9]*\) .*/\1/p' "$T/cgi.out")
    out=$(curl -s "http://127.0.0.1:$cport/cgi-bin/call.sh")
    echo "$out" | grep -qi '^sw8: ' || fail "the CGI's curl sent no sw8: $out"
    wait_for "[ \$(segs_of cgi-backend | wc -l) -ge 1 ] && [ \$(segs_of cgi-curl | wc -l) -ge 1 ] && [ \$(segs_of cgi-server | wc -l) -ge 1 ]" 20 ||
        fail "segments missing: $(jq -r .service "$T/seg.json" 2>/dev/null | sort | uniq -c)"
    srv=$(segs_of cgi-server | head -n 1)
    cur=$(segs_of cgi-curl | head -n 1)
    bck=$(segs_of cgi-backend | head -n 1)
    tid=$(echo "$srv" | jq -r .traceId)
    # The response was finished by the CGI child: the server's entry is not an error and
    # carries the status of the status line the server wrote before the fork.
    echo "$srv" | jq -e '.spans[] | select((.spanId // 0) == 0) | .spanType == "Entry"
        and (.isError // false) == false
        and ([.tags[] | select(.key == "http.status_code") | .value] == ["200"])' \
        >/dev/null || fail "server entry: $srv"
    xid=$(echo "$srv" | jq -r '[.spans[] | select(.spanType == "Exit" and .operationName == "EXEC:call.sh"
        and .peer == "exec:call.sh" and .parentSpanId == 0 and (.spanLayer // "Unknown") == "Unknown")
        | .spanId] | if length == 1 then .[0] else "none" end')
    [ "$xid" != none ] || fail "server has no EXEC:call.sh exit span: $srv"
    echo "$srv" | jq -e '(.spans | length) == 2 and ([.spans[] | select(.spanType == "Exit")
        | (.endTime | tonumber) >= (.startTime | tonumber)] | all)' >/dev/null ||
        fail "server segment shape: $srv"
    [ "$(echo "$cur" | jq -r .traceId)" = "$tid" ] || fail "curl's segment is not in the server's trace: $cur"
    [ "$(echo "$bck" | jq -r .traceId)" = "$tid" ] || fail "backend's segment is not in the trace: $bck"
    echo "$cur" | jq -e --arg seg "$(echo "$srv" | jq -r .traceSegmentId)" --argjson xid "$xid" '
        (.spans | length) == 2
        and (.spans[] | select((.spanId // 0) == 0) | .spanType == "Entry" and .operationName == "EXEC:curl"
             and (.refs[0].parentTraceSegmentId == $seg) and ((.refs[0].parentSpanId // 0) == $xid)
             and (.refs[0].networkAddressUsedAtPeer == "exec:call.sh")
             and (.refs[0].parentService == "cgi-server"))
        and (.spans[] | select(.spanId == 1) | .spanType == "Exit" and .parentSpanId == 0)' \
        >/dev/null || fail "curl's segment shape: $cur"
    echo "$bck" | jq -e --arg seg "$(echo "$cur" | jq -r .traceSegmentId)" \
        '.spans[0].refs[0].parentTraceSegmentId == $seg and .spans[0].refs[0].parentSpanId == 1' \
        >/dev/null || fail "backend ref: $bck"
    ;;
forking)
    # A forking python server (socketserver.ForkingMixIn): every request is served in a new
    # child process, which makes its own ring; every request's segment arrives.
    mkdir -m 700 "$T/run"
    write_config "swagent.runtime_dir=$T/run" "agent.service_name=forking"
    start_stub
    start_server fork env LD_PRELOAD="$SWAGENT_LIB" python3 -u -c '
import http.server, socketserver, sys
class S(socketserver.ForkingMixIn, http.server.HTTPServer): pass
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = b"pid"
        self.send_response(200); self.send_header("Content-Length", str(len(b))); self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a): pass
s = S(("127.0.0.1", 0), H)
print("PORT", s.server_address[1], flush=True)
s.serve_forever()'
    n=30
    for i in $(seq $n); do curl -sf -o /dev/null "http://127.0.0.1:$port/r$i" || fail "request $i"; done
    wait_for "[ \$(segs_of forking | wc -l) -ge $n ]" 20 || fail "$(segs_of forking | wc -l) of $n segments"
    [ "$(segs_of forking | jq -r '.spans[0].operationName' | sort -u | wc -l)" = $n ] ||
        fail "operation names: $(segs_of forking | jq -r '.spans[0].operationName' | sort | uniq -c)"
    # Every child made a ring of its own: the rings still there plus those the reporter removed
    # once their process was gone and they were drained (status file, removed_rings) are at
    # least one per request (children sharing their parent's ring would make 1).
    rings_seen() {
        echo $(($(ls "$T/run" | grep -c '^ring-') + $(sed -n 's/.* removed_rings=\([0-9]*\).*/\1/p' \
            "$T/run"/reporter-*.status 2>/dev/null | head -n 1 | grep . || echo 0)))
    }
    wait_for "[ \$(rings_seen) -ge $n ]" 10 ||
        fail "$(rings_seen) rings for $n requests served by $n children: $(ls "$T/run"; cat "$T/run"/reporter-*.status)"
    echo "# forking: $(rings_seen) rings (left + removed) for $n requests"
    ;;
stress | overflow | forkstorm)
    mkdir -m 700 "$T/run"
    : >"$T/agent.config"
    export SW_AGENT_CONFIG=$T/agent.config SW_AGENT_RUNTIME_DIR=$T/run SW_AGENT_SAMPLE=-1
    export SW_AGENT_REPORTER_PATH=/nonexistent/swagent-reporter
    # Many 64 MiB rings (sparse files): far above the default swagent.ring_total_cap.
    export SW_AGENT_RING_TOTAL_CAP=$((1 << 40))
    if [ "$case_name" = forkstorm ]; then
        export SW_AGENT_RING_BYTES=$((64 << 20))
        timeout 500 "$STRESS" 8 2000 forkstorm >"$T/stress.out" 2>"$T/stress.err" ||
            fail "forkstorm: $(cat "$T/stress.out")"
        [ "$(ls "$T/run" | grep -c '^ring-')" -ge 101 ] || fail "the fork children made no rings"
    elif [ "$case_name" = stress ]; then
        export SW_AGENT_RING_BYTES=$((64 << 20)) # the consumer drains slower than 16 threads fill
        timeout 500 "$STRESS" "${STRESS_THREADS:-8}" "${STRESS_REQUESTS:-10000}" drain \
            >"$T/stress.out" 2>"$T/stress.err" || fail "stress: $(cat "$T/stress.out")"
    else
        # Smallest ring (64 KiB), nobody drains: 20,000 segments cannot fit. The load must
        # finish promptly (never blocked by the full ring); once it is full new traces are shed
        # (counted) and no started segment is dropped.
        export SW_BUFFER_CHANNEL_SIZE=1 SW_BUFFER_BUFFER_SIZE=1
        timeout 120 "$STRESS" 4 2500 nodrain >"$T/stress.out" 2>"$T/stress.err" ||
            fail "overflow: $(cat "$T/stress.out")"
        f=$(ls "$T/run"/ring-*.swr | head -n 1)
        [ "$(stat -c %s "$f")" -le $((4096 + 65536)) ] || fail "ring is not the smallest size"
    fi
    cat "$T/stress.out"
    ;;
setuid)
    # A secure-execution (AT_SECURE) process: a setuid-root copy of the helper run as nobody.
    # With LD_PRELOAD the loader itself refuses our (non-system) path; with dlopen, which
    # secure mode does not restrict, the agent's own getauxval(AT_SECURE) check turns it off:
    # its wrappers then pass calls straight to libc (no sw8). The same copy run by root without
    # the setuid bit (no AT_SECURE) does insert sw8, so the check can fail.
    [ "$(id -u)" = 0 ] || { echo "SKIP: not root"; exit 77; }
    command -v setpriv >/dev/null || { echo "SKIP: setpriv missing"; exit 77; }
    id nobody >/dev/null 2>&1 || { echo "SKIP: no user nobody"; exit 77; }
    safety_env
    cp "$SAFETY_HELPER" "$T/suid"
    cp "$SWAGENT_LIB" "$T/libswagent.so"
    chmod 755 "$T/suid" "$T/libswagent.so"
    out=$("$T/suid" dlopen "$T/libswagent.so" "$port") || fail "control run: $out"
    [ "$out" = "SW8 1" ] || fail "control (no AT_SECURE): $out"
    chmod 4755 "$T/suid"
    NB="setpriv --reuid=nobody --regid=nogroup --clear-groups"
    out=$($NB "$T/suid" dlopen "$T/libswagent.so" "$port") || fail "setuid dlopen run: $out"
    [ "$out" = "SW8 0" ] || fail "agent active in a setuid process: $out"
    out=$($NB env LD_PRELOAD="$T/libswagent.so" "$T/suid" get "$port" 2>&1) ||
        fail "setuid LD_PRELOAD run: $out"
    [ "$out" = "SW8 0" ] || fail "agent active in a setuid process (LD_PRELOAD): $out"
    ;;
closefrom | close_range | dup2_log)
    # The application closes every fd above 2 (or dup2s its own file over the agent's log fd),
    # then opens a file of its own (which gets the log fd's old number) and makes the agent
    # log (a segment with no usable ring dir). The agent notices its log fd is gone or not its
    # file, never writes into the application's file, and logs into a reopened log.
    safety_env
    export SW_AGENT_RUNTIME_DIR=$T/not-a-dir
    : >"$SW_AGENT_RUNTIME_DIR"
    # The log opens with its first line; at DEBUG that is the start-up line, so the log fd is
    # there before the application closes its fds.
    export SW_LOGGING_LEVEL=DEBUG
    mode=$case_name; [ "$mode" = dup2_log ] && mode=dup2
    out=$(agent "$SAFETY_HELPER" closefds "$mode" "$port" "$T/app.txt") || fail "helper: $out"
    echo "$out"
    echo "$out" | grep -q "^SW8 1$" || fail "request after closing: $out"
    [ "$(cat "$T/app.txt")" = "$(printf 'app1\napp2')" ] ||
        fail "the application's file was written by the agent: $(od -c "$T/app.txt" | head)"
    grep -q "cannot create the segment ring" "$T/log/swagent.log" ||
        fail "the agent did not log after its fd was taken: $(cat "$T/log/swagent.log")"
    ;;
reporter_missing)
    # A reporter that cannot be started (swagent.reporter_path wrong, or not a program) is
    # logged once per process, with why and the setting to fix; the program runs as usual.
    safety_env
    out=$(agent "$SAFETY_HELPER" get "$port") || fail "helper: $out"
    [ "$out" = "SW8 1" ] || fail "request: $out"
    [ "$(grep -c 'ERROR swagent\[.*trace: swagent-reporter not found (error 2; swagent.reporter_path=/nonexistent/swagent-reporter)' "$T/log/swagent.log")" = 1 ] ||
        fail "no single line for the missing reporter: $(cat "$T/log/swagent.log")"
    # Found and executable, but its execve fails (ENOEXEC): the grandchild's error reaches the
    # agent (before, the spawn reported success and nothing was logged).
    : >"$T/log/swagent.log"
    printf 'not a program\n' >"$T/not-a-reporter"
    chmod 755 "$T/not-a-reporter"
    out=$(SW_AGENT_REPORTER_PATH=$T/not-a-reporter agent "$SAFETY_HELPER" get "$port") ||
        fail "helper: $out"
    [ "$out" = "SW8 1" ] || fail "request: $out"
    grep -q "ERROR swagent\[.*trace: swagent-reporter not an executable this system can run (error 8; swagent.reporter_path=$T/not-a-reporter)" "$T/log/swagent.log" ||
        fail "no line for a reporter that cannot be exec'd: $(cat "$T/log/swagent.log")"
    ;;
quiet_start)
    # The log opens with its first line: commands that trace nothing (a shell's /bin/true, ls)
    # create no log file and write no line; the first segment of a process logs the INFO
    # "enabled" line once; at DEBUG every process logs its start.
    safety_env
    agent /bin/true || fail "/bin/true under the agent"
    agent sh -c 'ls / >/dev/null && /bin/true' || fail "sh under the agent"
    [ ! -e "$T/log/swagent.log" ] || fail "a process that traced nothing logged: $(cat "$T/log/swagent.log")"
    out=$(agent "$SAFETY_HELPER" get "$port") || fail "helper: $out"
    [ "$out" = "SW8 1" ] || fail "request: $out"
    [ "$(grep -c 'INFO swagent\[.*enabled: service=.*: first segment, ring in' "$T/log/swagent.log")" = 1 ] ||
        fail "no single first-segment line: $(cat "$T/log/swagent.log")"
    : >"$T/log/swagent.log"
    SW_LOGGING_LEVEL=DEBUG agent /bin/true || fail "/bin/true at DEBUG"
    grep -q 'DEBUG swagent\[.*\]: swagent .* loaded: service=' "$T/log/swagent.log" ||
        fail "no start-up line at DEBUG: $(cat "$T/log/swagent.log")"
    # /bin/true opens no internet socket: the agent never activates in it (agent.c).
    ! grep -q 'enabled: service=' "$T/log/swagent.log" ||
        fail "the agent activated in /bin/true: $(cat "$T/log/swagent.log")"
    : >"$T/log/swagent.log"
    out=$(SW_LOGGING_LEVEL=DEBUG agent "$SAFETY_HELPER" get "$port") || fail "helper: $out"
    grep -q 'DEBUG swagent\[.*\]: swagent .* enabled: service=' "$T/log/swagent.log" ||
        fail "no activation line at DEBUG: $(cat "$T/log/swagent.log")"
    ;;
lazy_start)
    # The agent activates with a process's first internet or Unix-domain stream socket, or
    # accept (agent.c): before that it has mapped nothing of its own (the pools are ~80 MiB of
    # reserved address space, mapped at activation), so a program that does no networking pays
    # only the load. UDP and Unix datagram sockets never activate it.
    safety_env
    # The bytes of anonymous mappings (MiB), in one process before and after its sockets (a
    # sanitizer runtime has big mappings of its own from the start; adjacent ones merge).
    for kind in tcp unix; do
        out=$(agent python3 -c '
import socket, sys
def anon():
    n = 0
    for line in open("/proc/self/maps"):
        f = line.split()
        if len(f) == 5:
            a, b = f[0].split("-")
            n += int(b, 16) - int(a, 16)
    return n >> 20
n0 = anon()
u = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
d = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
n1 = anon()
t = socket.socket() if sys.argv[1] == "tcp" else socket.socket(socket.AF_UNIX)
print(n0, n1, anon())' "$kind") || fail "python3 under the agent: $out"
        read -r n0 n1 n2 <<<"$out"
        [ "$n1" -lt $((n0 + 16)) ] || fail "a datagram socket activated the agent (anonymous MiB: $out)"
        [ "$n2" -ge $((n1 + 64)) ] ||
            fail "the pools were mapped before the first $kind stream socket, or not at it (anonymous MiB: $out)"
    done
    # Threads whose first sockets race for the activation: the losers wait for it, so every
    # one of their requests is traced (carries sw8). Repeated: the race is a matter of timing.
    for i in 1 2 3 4 5; do
        out=$(agent "$SAFETY_HELPER" race "$port" 16) || fail "race helper: $out"
        [ "$out" = "SW8 16" ] || fail "round $i: requests of racing first sockets without sw8: $out"
    done
    # An inherited listener (socket activation by systemd, inetd): the first accept activates
    # the agent, and the request it accepts is traced.
    out=$(python3 - "$SWAGENT_LIB" <<'PY' 2>&1
import os, socket, subprocess, sys
child = """
import socket, sys
s = socket.socket(fileno=int(sys.argv[1]))
c, _ = s.accept()
data = b""
while b"\\r\\n\\r\\n" not in data:
    data += c.recv(4096)
c.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\nConnection: close\\r\\n\\r\\nok")
c.close()
"""
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(1)
env = dict(os.environ, LD_PRELOAD=sys.argv[1])
p = subprocess.Popen([sys.executable, "-c", child, str(l.fileno())], pass_fds=[l.fileno()], env=env)
c = socket.create_connection(l.getsockname(), timeout=20)
c.sendall(b"GET /inherited HTTP/1.1\r\nHost: a\r\n\r\n")
print(c.recv(4096).split(b"\r\n")[0].decode())
p.wait(timeout=20)
PY
)
    [ "$out" = "HTTP/1.1 200 OK" ] || fail "server on an inherited listener: $out"
    wait_for "ls '$T'/run/ring-*.swr >/dev/null 2>&1" 10 ||
        fail "the request accepted on an inherited listener was not recorded"
    ;;
cloexec)
    safety_env
    # Started with no inherited fd above 2 (ctest and shells leak some), so every fd above 2
    # after the request is the agent's.
    out=$(python3 -c 'import os, sys; os.closerange(3, 65536); os.execvp(sys.argv[1], sys.argv[1:])' \
        env LD_PRELOAD="$SWAGENT_LIB" "$SAFETY_HELPER" cloexec "$port" 2>&1) || fail "$out"
    ls "$T/run"/ring-*.swr >/dev/null 2>&1 || fail "no ring was made"
    ;;
symlink_rundir)
    # swagent.runtime_dir is a symlink to a 0700 directory of ours: refused (no ring there, no
    # uid-<uid> inside it), the program runs and sends sw8 as usual.
    safety_env
    mkdir -m 700 "$T/real"
    ln -s "$T/real" "$T/link"
    export SW_AGENT_RUNTIME_DIR=$T/link
    out=$(agent "$SAFETY_HELPER" get "$port") || fail "$out"
    [ "$out" = "SW8 1" ] || fail "request: $out"
    [ -z "$(ls -A "$T/real")" ] || fail "the agent wrote through the symlink: $(ls -A "$T/real")"
    grep -q "cannot create the segment ring" "$T/log/swagent.log" || fail "not logged"
    ;;
symlink_log)
    # The log file is a symlink (to a file someone wants us to append to): never followed.
    safety_env
    # Positive control: with a plain log file the same run logs (the missing reporter), so an
    # empty victim below means "not followed", not "nothing to write".
    out=$(agent "$SAFETY_HELPER" get "$port") || fail "$out"
    [ "$out" = "SW8 1" ] || fail "control request: $out"
    [ -s "$T/log/swagent.log" ] || fail "control: nothing logged to a plain log file"
    rm "$T/log/swagent.log"
    : >"$T/victim"
    ln -s "$T/victim" "$T/log/swagent.log"
    out=$(agent "$SAFETY_HELPER" get "$port") || fail "$out"
    [ "$out" = "SW8 1" ] || fail "request: $out"
    [ ! -s "$T/victim" ] || fail "the agent wrote through the log symlink"
    ;;
modes)
    # Created files: runtime dir 0700, ring and log 0600, whatever the umask.
    safety_env
    rmdir "$T/run" "$T/log"
    out=$(umask 000; agent "$SAFETY_HELPER" get "$port") || fail "$out"
    [ "$(stat -c %a "$T/run")" = 700 ] || fail "runtime dir mode $(stat -c %a "$T/run")"
    [ "$(stat -c %a "$T/log")" = 700 ] || fail "log dir mode $(stat -c %a "$T/log")"
    [ "$(stat -c %a "$T/log/swagent.log")" = 600 ] || fail "log mode"
    for f in "$T/run"/ring-*.swr; do
        [ "$(stat -c %a "$f")" = 600 ] || fail "ring mode $(stat -c %a "$f")"
    done
    ;;
oom)
    # Address space too small for the agent's pools (ulimit -v): the agent turns itself off
    # (logged), the program runs normally.
    safety_env
    out=$(ulimit -v 40000; agent "$SAFETY_HELPER" get "$port") || fail "program failed: $out"
    [ "$out" = "SW8 0" ] || fail "request under ulimit -v: $out"
    grep -q "swagent off" "$T/log/swagent.log" || fail "not logged: $(cat "$T/log/swagent.log")"
    out=$(agent "$SAFETY_HELPER" get "$port") || fail "$out"
    [ "$out" = "SW8 1" ] || fail "control without the limit: $out"
    ;;
threading)
    # python3 -m http.server (ThreadingHTTPServer: one thread per connection) under load from
    # 8 concurrent curl loops: every request's entry segment arrives, with its own operation
    # name, status 200 and a ref to the curl exit that made it.
    mkdir -m 700 "$T/run"
    write_config "swagent.runtime_dir=$T/run"
    start_stub
    mkdir "$T/www"
    for i in $(seq 8); do echo "file $i" >"$T/www/f$i"; done
    start_server www env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=threading-server \
        python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/www"
    cpids=""
    for i in $(seq 8); do
        (for k in $(seq 15); do
            SW_AGENT_NAME=threading-curl agent curl -sf -o /dev/null "http://127.0.0.1:$port/f$i?k=$k" || exit 1
        done) &
        cpids="$cpids $!"
    done
    for p in $cpids; do wait "$p" || fail "a curl loop failed"; done
    wait_for "[ \$(segs_of threading-server | wc -l) -ge 120 ] && [ \$(segs_of threading-curl | wc -l) -ge 120 ]" 30 ||
        fail "$(segs_of threading-server | wc -l) server / $(segs_of threading-curl | wc -l) curl segments of 120"
    jq -s '
        (map(select(.service == "threading-curl")) | map({key: .traceSegmentId, value: .}) | from_entries) as $cur
        | [ .[] | select(.service == "threading-server") | .spans[0] as $e
            | select(($e.spanType != "Entry") or ($e.operationName | test("^GET:/f[1-8]$") | not)
                     or ([$e.tags[]? | select(.key == "http.status_code") | .value] != ["200"])
                     or ($cur[$e.refs[0].parentTraceSegmentId] == null)
                     or ($cur[$e.refs[0].parentTraceSegmentId].traceId != .traceId)
                     or (($cur[$e.refs[0].parentTraceSegmentId].spans[0].tags[] | select(.key == "url") | .value
                          | sub("\\?.*"; "") | sub(".*/"; "")) != ($e.operationName | sub("GET:/"; ""))))
          ] | length' "$T/seg.json" >"$T/bad" || fail "jq"
    [ "$(cat "$T/bad")" = 0 ] || fail "$(cat "$T/bad") server segments wrong"
    [ "$(segs_of threading-server | jq -r .traceId | sort -u | wc -l)" = 120 ] || fail "trace ids not distinct"
    ;;
selfnote)
    # The reporter never runs the agent, whatever its file is called (the ELF note of
    # agent/selfnote.h, found in the program headers); any other program does.
    mkdir -m 700 -p "$T/run" "$T/log"
    : >"$T/agent.config"
    export SW_AGENT_CONFIG=$T/agent.config SW_AGENT_RUNTIME_DIR=$T/run SW_LOGGING_DIR=$T/log
    export SW_AGENT_REPORTER_PATH=/nonexistent/swagent-reporter SW_LOGGING_LEVEL=DEBUG
    cp "$REPORTER" "$T/renamed-daemon"
    ln -s "$T/renamed-daemon" "$T/swagent-link"
    for r in "$REPORTER" "$T/renamed-daemon" "$T/swagent-link"; do
        agent "$r" --help >/dev/null 2>&1
        [ ! -s "$T/log/swagent.log" ] || fail "the agent ran in $r: $(cat "$T/log/swagent.log")"
    done
    readelf -nW "$REPORTER" | grep -q 'swagent .*0x53575250' || fail "no note in the reporter"
    # The same test on programs that are not the reporter: the agent is on in each.
    cp /bin/true "$T/swagent-reporter"
    for p in /bin/true "$T/swagent-reporter" "$SAFETY_HELPER"; do
        : >"$T/log/swagent.log"
        agent "$p" >/dev/null 2>&1
        grep -q "swagent .* loaded" "$T/log/swagent.log" || fail "the agent did not start in $p"
    done
    ;;
*)
    fail "unknown case $case_name"
    ;;
esac
[ -n "${SAFETY_DUMP:-}" ] && cat "$T/seg.json" >&2
echo "ok $case_name"
