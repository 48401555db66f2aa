#!/usr/bin/env bash
# The demo: a real call chain traced by swagent, its trace printed as the SkyWalking UI shows it.
#
#   curl  ->  nginx (reverse proxy, master + 2 workers)  ->  python3 -m http.server
#
# Every program runs unmodified under `swagent run` (LD_PRELOAD=libswagent.so). Their segments
# go through the shared-memory rings to swagent-reporter (started on demand by the first traced
# process) and over gRPC to collector-stub, which writes them as JSON lines; `collector-stub
# tree` renders the joined trace. Everything listens on 127.0.0.1 only and is stopped at exit.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
scripts/deps.sh
BUILD=${SW_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j"$(nproc)" >/dev/null
B=$ROOT/$BUILD

T=$(mktemp -d /tmp/swagent-demo.XXXXXX)
chmod 755 "$T"
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    kill "$(cat "$T/nginx.pid" 2>/dev/null)" 2>/dev/null || true
    sleep 0.3
    rm -rf "$T"
}
trap cleanup EXIT INT TERM

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Every traced process of this demo reads this config and nothing else of the machine's.
cat >"$T/agent.config" <<CFG
collector.heartbeat_period=\${SW_AGENT_COLLECTOR_HEARTBEAT_PERIOD:5}
swagent.reporter_idle_exit=\${SW_AGENT_REPORTER_IDLE_EXIT:3}
swagent.runtime_dir=$T/run
swagent.reporter_path=$B/agent/swagent-reporter
CFG
mkdir -m 700 "$T/run"
export SW_AGENT_CONFIG=$T/agent.config

"$B/collector-stub/collector-stub" --listen 127.0.0.1:0 --port-file "$T/stub.port" \
    --segments "$T/segments.json" --management "$T/management.json" 2>"$T/stub.log" &
PIDS+=($!)
for _ in $(seq 50); do [ -s "$T/stub.port" ] && break; sleep 0.1; done
COLLECTOR=127.0.0.1:$(cat "$T/stub.port")

PY_PORT=$(free_port)
NGINX_PORT=$(free_port)
mkdir -p "$T/www/api" "$T/nginx"
echo '{"orders": [1, 2, 3]}' >"$T/www/api/orders.json"

SW="$B/agent/swagent run --collector $COLLECTOR"
$SW --service python-backend -- python3 -m http.server "$PY_PORT" --bind 127.0.0.1 \
    --directory "$T/www" >"$T/python.log" 2>&1 &
PIDS+=($!)

cat >"$T/nginx/nginx.conf" <<CONF
worker_processes 2;
pid $T/nginx.pid;
error_log $T/nginx/error.log;
$( [ "$(id -u)" -eq 0 ] && echo "user root;" )
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path $T/nginx/body;
    proxy_temp_path $T/nginx/proxy;
    fastcgi_temp_path $T/nginx/fastcgi;
    uwsgi_temp_path $T/nginx/uwsgi;
    scgi_temp_path $T/nginx/scgi;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location / {
            proxy_pass http://127.0.0.1:$PY_PORT;
            proxy_http_version 1.1;
        }
    }
}
CONF
$SW --service nginx-proxy -- nginx -c "$T/nginx/nginx.conf" -p "$T/nginx" -g 'daemon off;' \
    >"$T/nginx/out.log" 2>&1 &
PIDS+=($!)

# Wait until both servers accept connections (a bare connect sends no HTTP, so no span).
for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$PY_PORT") 2>/dev/null && \
        (exec 3<>"/dev/tcp/127.0.0.1/$NGINX_PORT") 2>/dev/null && break
    sleep 0.1
done

echo "\$ swagent run --service curl-client -- curl http://127.0.0.1:$NGINX_PORT/api/orders.json"
$SW --service curl-client -- curl -sS "http://127.0.0.1:$NGINX_PORT/api/orders.json"

for _ in $(seq 100); do
    [ "$(wc -l <"$T/segments.json")" -ge 3 ] && break
    sleep 0.1
done
echo
echo "\$ collector-stub tree segments.json"
"$B/collector-stub/collector-stub" tree "$T/segments.json"
