#!/bin/sh
# run_preload.sh <case> - one preload test: real programs under LD_PRELOAD=libswagent.so.
# Environment (set by tests/agent.cmake): SWAGENT_LIB, HTTP_CLIENT, EARLY_LIB, PRELOAD_DIR.
# SW_TEST_PRELOAD (optional, from scripts/test.sh's sanitizer stage): libraries that must come
# before the agent in LD_PRELOAD (the shared ASan runtime), colon-separated.
# Servers listen on 127.0.0.1 with kernel-chosen ports and are stopped by PID on exit.
set -eu
case_name=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/swagent-preload.XXXXXX")
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    for p in $pids; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

# Agent settings for every traced process: private runtime and log dirs, no reporter spawned.
export SW_AGENT_RUNTIME_DIR="$work/run" SW_LOGGING_DIR="$work/log"
export SW_AGENT_REPORTER_PATH=/nonexistent/swagent-reporter SW_AGENT_SAMPLE=-1
mkdir -p -m 700 "$work/run" "$work/log"

fail() { echo "FAIL: $*" >&2; exit 1; }

# start_server <name> <command...>: runs it in the background, waits for its port.
start_server() {
    name=$1; shift
    "$@" > "$work/$name.out" 2> "$work/$name.err" &
    pids="$pids $!"
    i=0
    while [ $i -lt 100 ]; do
        port=$(sed -n 's/^PORT \([0-9]*\)$/\1/p; s/^Serving HTTP on .* port \([0-9]*\) .*/\1/p' \
               "$work/$name.out" | head -n 1)
        [ -n "$port" ] && return 0
        i=$((i + 1)); sleep 0.1
    done
    cat "$work/$name.err" >&2
    fail "$name did not start"
}

SWAGENT_PRELOAD="${SW_TEST_PRELOAD:+$SW_TEST_PRELOAD:}$SWAGENT_LIB"
agent() { env LD_PRELOAD="$SWAGENT_PRELOAD" "$@"; }

case $case_name in
sw8_*)
    mode=${case_name#sw8_}
    start_server echo python3 -u "$PRELOAD_DIR/echo_server.py" http 120
    agent "$HTTP_CLIENT" "$port" "$mode"
    ;;
control_no_agent)
    # Without the agent the same checks must see no sw8 line (the checks can tell).
    start_server echo python3 -u "$PRELOAD_DIR/echo_server.py" http 120
    EXPECT_SW8=0 "$HTTP_CLIENT" "$port" bytewise
    if "$HTTP_CLIENT" "$port" bytewise 2>/dev/null; then fail "client passed without sw8"; fi
    ;;
exclude_port)
    # plugin.httpclient.propagation_exclude_ports: no sw8 towards that port.
    start_server echo python3 -u "$PRELOAD_DIR/echo_server.py" http 120
    SW_PLUGIN_HTTPCLIENT_PROPAGATION_EXCLUDE_PORTS="1,$port" EXPECT_SW8=0 \
        agent "$HTTP_CLIENT" "$port" keepalive
    # Positive control, same run with other ports excluded: sw8 is sent (the agent is active
    # here; only the port in the list turns it off).
    other=$((port == 2 ? 3 : 2))
    SW_PLUGIN_HTTPCLIENT_PROPAGATION_EXCLUDE_PORTS="1,$other" EXPECT_SW8=1 \
        agent "$HTTP_CLIENT" "$port" keepalive
    ;;
disabled)
    start_server echo python3 -u "$PRELOAD_DIR/echo_server.py" http 120
    SW_AGENT_DISABLE=1 EXPECT_SW8=0 agent "$HTTP_CLIENT" "$port" bytewise
    ;;
raw)
    # A non-HTTP protocol passes untouched, in both directions, through a traced client and
    # a traced server.
    start_server raw env LD_PRELOAD="$SWAGENT_PRELOAD" python3 -u "$PRELOAD_DIR/echo_server.py" raw 120
    agent "$HTTP_CLIENT" "$port" raw
    ;;
traced_server)
    # Both ends traced: the server's entry spans do not disturb the echo.
    start_server echo env LD_PRELOAD="$SWAGENT_PRELOAD" python3 -u "$PRELOAD_DIR/echo_server.py" http 120
    agent "$HTTP_CLIENT" "$port" keepalive
    agent "$HTTP_CLIENT" "$port" pipeline
    agent "$HTTP_CLIENT" "$port" post
    agent "$HTTP_CLIENT" "$port" threads
    ;;
http_server_curl)
    # python3 -m http.server under the agent; downloads are byte-identical with and without
    # the agent on either side; uploads (POST) arrive intact.
    mkdir "$work/www"
    for s in 0 1 1000 65536 100000 3000000; do
        head -c "$s" /dev/urandom > "$work/www/f$s"
    done
    start_server www env LD_PRELOAD="$SWAGENT_PRELOAD" python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$work/www"
    for s in 0 1 1000 65536 100000 3000000; do
        want=$(md5sum < "$work/www/f$s")
        got=$(agent curl -sf "http://127.0.0.1:$port/f$s" | md5sum)
        [ "$got" = "$want" ] || fail "download f$s differs with the agent"
        got=$(curl -sf "http://127.0.0.1:$port/f$s" | md5sum)
        [ "$got" = "$want" ] || fail "download f$s differs (client without agent)"
    done
    # Several URLs on one keep-alive connection, and a HEAD request.
    agent curl -sf -o "$work/a" "http://127.0.0.1:$port/f1000" -o "$work/b" \
        "http://127.0.0.1:$port/f100000" || fail "keep-alive curl"
    cmp -s "$work/a" "$work/www/f1000" && cmp -s "$work/b" "$work/www/f100000" \
        || fail "keep-alive downloads differ"
    agent curl -sfI "http://127.0.0.1:$port/f65536" | grep -q "Content-Length: 65536" \
        || fail "HEAD"
    # Uploads to the (traced) echo server.
    start_server echo env LD_PRELOAD="$SWAGENT_PRELOAD" python3 -u "$PRELOAD_DIR/echo_server.py" http 120
    for s in 1 65536 3000000; do
        want=$(md5sum < "$work/www/f$s" | cut -d' ' -f1)
        agent curl -sf --data-binary "@$work/www/f$s" "http://127.0.0.1:$port/up" > "$work/up"
        grep -q "^--body-md5: $want" "$work/up" || fail "upload of $s bytes damaged"
        [ "$(grep -ci '^sw8: ' "$work/up")" = 1 ] || fail "upload without exactly one sw8"
    done
    ;;
unix)
    # Unix-domain stream sockets: curl --unix-socket under the agent gets exactly one sw8 line
    # (HTTP/1.x sniffed on the socket), through a traced server, uploads intact; without the
    # agent none (the check can tell); a non-HTTP stream on a Unix socket (and its traced echo
    # server) passes untouched both ways.
    start_server echo env LD_PRELOAD="$SWAGENT_PRELOAD" python3 -u "$PRELOAD_DIR/echo_server.py" \
        http 120 "$work/http.sock"
    agent curl -sf --unix-socket "$work/http.sock" http://localhost/u > "$work/u1" \
        || fail "curl over a Unix socket"
    [ "$(grep -ci '^sw8: ' "$work/u1")" = 1 ] || fail "not exactly one sw8 over a Unix socket"
    curl -sf --unix-socket "$work/http.sock" http://localhost/u > "$work/u0" \
        || fail "curl over a Unix socket (no agent)"
    [ "$(grep -ci '^sw8: ' "$work/u0")" = 0 ] || fail "sw8 without the agent"
    head -c 100000 /dev/urandom > "$work/up"
    want=$(md5sum < "$work/up" | cut -d' ' -f1)
    agent curl -sf --unix-socket "$work/http.sock" --data-binary "@$work/up" http://localhost/up \
        > "$work/u2" || fail "upload over a Unix socket"
    grep -q "^--body-md5: $want" "$work/u2" || fail "upload over a Unix socket damaged"
    start_server raw env LD_PRELOAD="$SWAGENT_PRELOAD" python3 -u "$PRELOAD_DIR/echo_server.py" \
        raw 120 "$work/raw.sock"
    agent python3 - "$work/raw.sock" "$work/up" <<'PY' || fail "raw bytes over a Unix socket"
import socket, sys
data = open(sys.argv[2], "rb").read()
for first in (b"\0AUTH EXTERNAL 30\r\n", b"POST / HTTP/1.1\r\nContent-Length: 0\r\n"):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    msg = first + data
    s.sendall(msg)
    s.shutdown(socket.SHUT_WR)
    got = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
    s.close()
    # The second stream begins like an HTTP head but never ends one: no byte may change.
    if got != msg:
        sys.exit("echo differs for a stream beginning %r" % first[:8])
PY
    ;;
ctor_hook)
    # Hooks reached from another library's constructor, before or after ours.
    start_server echo python3 -u "$PRELOAD_DIR/echo_server.py" http 120
    for order in "$EARLY_LIB $SWAGENT_LIB" "$SWAGENT_LIB $EARLY_LIB"; do
        env LD_PRELOAD="${SW_TEST_PRELOAD:+$SW_TEST_PRELOAD:}$order" "$HTTP_CLIENT" "$port" bytewise 2> "$work/early.err" \
            || { cat "$work/early.err" >&2; fail "client with LD_PRELOAD=$order"; }
        grep -q early-hook-ok "$work/early.err" || fail "early constructor hooks ($order)"
    done
    ;;
nginx)
    # nginx (master + 2 workers, forked) under the agent: static files go out with writev and
    # sendfile64 byte-identical; as a reverse proxy it forwards curl's sw8, and the agent puts
    # its own sw8 first and renames the forwarded one (exactly one "sw8:" reaches the backend).
    command -v nginx > /dev/null || { echo "SKIP: nginx not installed"; exit 77; }
    start_server echo python3 -u "$PRELOAD_DIR/echo_server.py" http 120
    eport=$port
    nport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    mkdir -p "$work/ngx/tmp" "$work/ngx/www"
    head -c 2000000 /dev/urandom > "$work/ngx/www/big"
    echo small > "$work/ngx/www/small"
    user=""; [ "$(id -u)" = 0 ] && user="user root;"
    cat > "$work/ngx/nginx.conf" <<NGX
$user
daemon off;
master_process on;
worker_processes 2;
# Workers keep the sanitizers' options (log_path: scripts/test.sh) for reporters they start.
env ASAN_OPTIONS; env UBSAN_OPTIONS; env TSAN_OPTIONS;
pid $work/ngx/nginx.pid;
error_log $work/ngx/error.log warn;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path $work/ngx/tmp; proxy_temp_path $work/ngx/tmp;
  fastcgi_temp_path $work/ngx/tmp; uwsgi_temp_path $work/ngx/tmp; scgi_temp_path $work/ngx/tmp;
  sendfile on;
  server {
    listen 127.0.0.1:$nport;
    root $work/ngx/www;
    location /up/ { proxy_pass http://127.0.0.1:$eport/; proxy_http_version 1.1;
                    proxy_set_header Connection ""; }
  }
}
NGX
    env LD_PRELOAD="$SWAGENT_PRELOAD" nginx -c "$work/ngx/nginx.conf" -p "$work/ngx" > "$work/ngx/out" 2>&1 &
    pids="$pids $!"
    i=0
    until curl -s -o /dev/null "http://127.0.0.1:$nport/small"; do
        i=$((i + 1)); [ $i -lt 100 ] || { cat "$work/ngx/error.log" >&2; fail "nginx did not start"; }
        sleep 0.1
    done
    for f in big small; do
        want=$(md5sum < "$work/ngx/www/$f")
        got=$(agent curl -sf "http://127.0.0.1:$nport/$f" | md5sum)
        [ "$got" = "$want" ] || fail "nginx static $f differs"
    done
    for n in 1 2 3; do
        agent curl -sf "http://127.0.0.1:$nport/up/p$n" > "$work/proxied"
        [ "$(grep -c '^sw8: ' "$work/proxied")" = 1 ] || { cat "$work/proxied" >&2; fail "proxied sw8 count"; }
        [ "$(grep -c '^swx: ' "$work/proxied")" = 1 ] || { cat "$work/proxied" >&2; fail "forwarded sw8 not renamed"; }
    done
    ;;
*)
    fail "unknown case $case_name"
    ;;
esac
echo "ok $case_name"
