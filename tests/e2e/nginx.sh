#!/usr/bin/env bash
# nginx.sh - curl (traced) -> nginx (traced reverse proxy, `worker_processes auto`, and when
# started as root the default `user nobody`) -> python3 -m http.server (traced): one trace,
# three segments, every link right: nginx's entry ref -> curl's exit, nginx's exit a child of
# nginx's entry in the same segment, python's ref -> nginx's exit, each ref's
# networkAddressUsedAtPeer byte-equal to the caller's exit peer. (E2E_NGINX_USER=root, for
# debugging only, adds a `user` line; the test itself runs nginx with its defaults.)
E2E_NAME=nginx
. "$E2E_DIR/lib.sh"
command -v nginx >/dev/null || { echo "FAIL: nginx not installed" >&2; exit 1; }
e2e_init
start_stub
start_orders_backend e2e-python
NG=$(free_port)
nginx_proxy_conf "$NG" "$PY" "worker_processes auto;" ${E2E_NGINX_USER:+"user $E2E_NGINX_USER;"}
env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=e2e-nginx nginx -c "$T/ngx/nginx.conf" -p "$T/ngx" -g 'daemon off;' >"$T/nginx.out" 2>&1 &
PIDS="$PIDS $!"
wait_for "(exec 3<>/dev/tcp/127.0.0.1/$NG) 2>/dev/null" 10 || fail "nginx did not start"
[ "$(id -u)" = 0 ] && echo "nginx started as root: workers run as $(ps -o user= --ppid "$(cat "$T/ngx/x.nginx.pid")" | sort -u | tr '\n' ' ')"

T_START=$(now_ms)
body=$(traced e2e-curl curl -sS "http://127.0.0.1:$NG/api/orders.json") || fail "curl failed"
[ "$body" = '{"orders": [1, 2, 3]}' ] || fail "body changed: $body"
wait_segments 3
T_END=$(now_ms)

check 'length == 3' "expected exactly 3 segments"
check "$JQDEFS"' ([$s[].traceId] | unique | length) == 1' "one trace id"
check "$JQDEFS"' all($s[]; root0) and all($s[].spans[]; sane_times)' "roots and times"
check "$JQDEFS"' (seg("e2e-curl") | length) == 1 and (seg("e2e-nginx") | length) == 1
    and (seg("e2e-python") | length) == 1' "one segment per service"
# curl: one exit span to nginx.
check "$JQDEFS"' seg("e2e-curl")[0].spans | length == 1 and (.[0] | .spanType == "Exit"
    and http_span("GET:/api/orders.json"; "200") and .peer == "127.0.0.1:'"$NG"'")' "curl exit span"
# nginx: entry (span 0) with the ref to curl, exit (span 1, parent 0) to python.
check "$JQDEFS"' seg("e2e-nginx")[0] as $n | ($n.spans | length) == 2
    and ($n.spans | map(select(.spanId == 0))[0] | .spanType == "Entry"
         and http_span("GET:/api/orders.json"; "200"))
    and ($n.spans | map(select(.spanId == 1))[0] | .spanType == "Exit" and .parentSpanId == 0
         and http_span("GET:/api/orders.json"; "200") and .peer == "127.0.0.1:'"$PY"'"
         and (.refs | length) == 0)' "nginx entry + exit"
check "$JQDEFS"' seg("e2e-nginx")[0] as $n | seg("e2e-curl")[0] as $c
    | ($n | .spans |= sort_by(.spanId)) as $ns | links($ns; $c; $c.spans[0])' "nginx ref -> curl exit"
check "$JQDEFS"' seg("e2e-nginx")[0] as $n | seg("e2e-python")[0] as $p
    | ($n.spans | map(select(.spanId == 1))[0]) as $x
    | ($p.spans | length) == 1 and ($p.spans[0] | .spanType == "Entry"
        and http_span("GET:/api/orders.json"; "200")) and links($p; $n; $x)' "python ref -> nginx exit"
echo "ok nginx"
