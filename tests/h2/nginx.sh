#!/usr/bin/env bash
# nginx.sh - nginx with `http2` on a TLS listener (traced, 2 workers) in front of an HTTP/1.1
# backend (python3 http.server, proxy_pass) and a gRPC backend (greeter.py, grpc_pass over
# cleartext HTTP/2): curl --http2 (ALPN h2) -> nginx -> http.server, and a greeter.py client
# over TLS -> nginx -> greeter.py, three times each: each request one trace across the three
# processes (the client's exit, nginx's entry with its exit as child, the backend's entry
# child of that exit), the gRPC spans named helloworld.Greeter.sayHello.
E2E_NAME=h2_nginx
. "$E2E_DIR/lib.sh"
. "$E2E_DIR/tls_lib.sh"
. "$H2_DIR/h2lib.sh"
h2_setup nginx curl
need_grpc
start_orders_backend h2-py
start_greeter gsrv h2-gsrv
GP=$PORT
NG=$(free_port)
nginx_conf "    server {
        listen 127.0.0.1:$NG ssl http2;
        ssl_certificate $T/tls/srv.pem;
        ssl_certificate_key $T/tls/srv.key;
        location /api/ {
            proxy_pass http://127.0.0.1:$PY;
            proxy_http_version 1.1;
        }
        location /helloworld.Greeter/ {
            grpc_pass grpc://127.0.0.1:$GP;
        }
    }" "worker_processes 2;"
env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=h2-nginx nginx -c "$T/ngx/nginx.conf" -p "$T/ngx" \
    -g 'daemon off;' >"$T/nginx.out" 2>&1 &
PIDS="$PIDS $!"
wait_port "$NG" 10 || fail "nginx did not start"

T_START=$(now_ms)
for i in 1 2 3; do
    body=$(traced h2-curl curl -sS --http2 --cacert "$CA" "https://127.0.0.1:$NG/api/orders.json") ||
        fail "curl $i failed"
    [ "$body" = '{"orders": [1, 2, 3]}' ] || fail "body changed: $body"
    out=$(greet h2-gcli "127.0.0.1:$NG" SayHello --tls "$CA") || fail "greeter call $i failed: $out"
    [ "$out" = "hello world 0" ] || fail "greeter got: $out"
done
wait_segments 18
T_END=$(now_ms)
G=helloworld.Greeter.sayHello
check 'length == 18' "expected exactly 18 segments"
check "$JQDEFS"' ([$s[].traceId] | unique | length) == 6' "six trace ids"
check "$JQDEFS"' all($s[]; root0) and all($s[].spans[]; sane_times)' "roots and times"
check "$JQDEFS"' [seg("h2-curl"), seg("h2-gcli"), seg("h2-nginx"), seg("h2-py"), seg("h2-gsrv")]
    | map(length) == [3, 3, 6, 3, 3]' "segments per service"
check "$JQDEFS$H2DEFS"' all(seg("h2-curl")[]; .spans | length == 1 and (.[0] | .spanType == "Exit"
    and h2_http("GET:/api/orders.json"; "200") and .peer == "127.0.0.1:'"$NG"'"))' "curl exits"
check "$JQDEFS$H2DEFS"' all(seg("h2-gcli")[]; .spans | length == 1 and (.[0] | .spanType == "Exit"
    and grpc_span("'$G'"; "OK") and .peer == "127.0.0.1:'"$NG"'"))' "gRPC client exits"
# nginx: an entry (HTTP/2 over TLS) and its exit (HTTP/1.1 to http.server, or HTTP/2 to the
# gRPC backend), one trace with the caller above and the backend below.
for pair in "h2-curl h2-py $PY" "h2-gcli h2-gsrv $GP"; do
    set -- $pair
    check "$JQDEFS$H2DEFS"' [seg("h2-nginx")[] | . as $n | [seg("'$1'")[] | select(.traceId == $n.traceId)] as $c
        | select(($c | length) == 1) | ($n | .spans |= sort_by(.spanId)) as $ns
        | ($ns.spans | length) == 2 and $ns.spans[0].spanType == "Entry"
        and $ns.spans[1].spanType == "Exit" and $ns.spans[1].parentSpanId == 0
        and $ns.spans[1].peer == "127.0.0.1:'"$3"'"
        and links($ns; $c[0]; $c[0].spans[0])
        and ([seg("'$2'")[] | select(.traceId == $n.traceId)] as $b | ($b | length) == 1
             and links($b[0]; $ns; $ns.spans[1]))] | length == 3 and all' "$1 -> nginx -> $2: one trace each"
done
check "$JQDEFS$H2DEFS"' all(seg("h2-gsrv")[]; .spans[0] | .spanType == "Entry" and grpc_span("'$G'"; "OK"))' \
    "gRPC backend entries"
grep -q "exited on signal" "$T/ngx/error.log" && fail "an nginx worker crashed"
echo "ok h2_nginx"
