#!/usr/bin/env bash
# tls_nginx.sh - HTTPS end to end: curl https:// (traced; OpenSSL through curl's memory BIO)
# -> nginx (traced; `listen ... ssl`, 2 workers, `proxy_pass https://`) -> tls_server.py
# (traced; Python's ssl): for each of three requests one trace, three segments, every link
# right (nginx's entry ref -> curl's exit, nginx's exit a child of its entry, the backend's
# ref -> nginx's exit, each ref's networkAddressUsedAtPeer equal to the caller's exit peer),
# url tags https://, and the sw8 the backend received is the one the agent inserted in nginx
# (it names nginx's segment and exit span).
E2E_NAME=tls_nginx
. "$E2E_DIR/lib.sh"
. "$E2E_DIR/tls_lib.sh"
command -v nginx >/dev/null || { echo "FAIL: nginx not installed" >&2; exit 1; }
e2e_init
start_stub
tls_certs
start_tls_backend e2e-tlspy
NG=$(free_port)
nginx_conf "    server {
        listen 127.0.0.1:$NG ssl;
        ssl_certificate $T/tls/srv.pem;
        ssl_certificate_key $T/tls/srv.key;
        location / {
            proxy_pass https://127.0.0.1:$TLSPY;
            proxy_http_version 1.1;
        }
    }" "worker_processes 2;"
env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=e2e-tlsnginx nginx -c "$T/ngx/nginx.conf" -p "$T/ngx" -g 'daemon off;' >"$T/nginx.out" 2>&1 &
PIDS="$PIDS $!"
wait_for "(exec 3<>/dev/tcp/127.0.0.1/$NG) 2>/dev/null" 10 || fail "nginx did not start"
[ "$(ps -o pid= --ppid "$(cat "$T/ngx/x.nginx.pid")" | wc -l)" = 2 ] || fail "expected 2 nginx workers"

T_START=$(now_ms)
for i in 1 2 3; do
    body=$(traced e2e-curl curl -sS --cacert "$T/tls/ca.pem" "https://127.0.0.1:$NG/api/orders.json") ||
        fail "curl $i failed"
    [ "$body" = '{"orders": [1, 2, 3]}' ] || fail "body changed: $body"
done
wait_segments 9
T_END=$(now_ms)

check 'length == 9' "expected exactly 9 segments"
check "$JQDEFS"' ([$s[].traceId] | unique | length) == 3' "three trace ids"
check "$JQDEFS"' all($s[]; root0) and all($s[].spans[]; sane_times)' "roots and times"
check "$JQDEFS"' (seg("e2e-curl") | length) == 3 and (seg("e2e-tlsnginx") | length) == 3
    and (seg("e2e-tlspy") | length) == 3' "three segments per service"
check "$JQDEFS"' all(seg("e2e-curl")[]; .spans | length == 1 and (.[0] | .spanType == "Exit"
    and http_span("GET:/api/orders.json"; "200") and .peer == "127.0.0.1:'"$NG"'"
    and tag("url") == "https://127.0.0.1:'"$NG"'/api/orders.json"))' "curl exit spans (https url)"
check "$JQDEFS"' all(seg("e2e-tlsnginx")[]; . as $n | ($n.spans | length) == 2
    and ($n.spans | map(select(.spanId == 0))[0] | .spanType == "Entry"
         and http_span("GET:/api/orders.json"; "200") and (tag("url") | startswith("https://")))
    and ($n.spans | map(select(.spanId == 1))[0] | .spanType == "Exit" and .parentSpanId == 0
         and http_span("GET:/api/orders.json"; "200") and .peer == "127.0.0.1:'"$TLSPY"'"
         and tag("url") == "https://127.0.0.1:'"$TLSPY"'/api/orders.json"
         and (.refs | length) == 0))' "nginx entry + exit"
check "$JQDEFS"' all(seg("e2e-tlsnginx")[]; . as $n
    | (seg("e2e-curl") | map(select(.traceId == $n.traceId))) as $c | ($c | length) == 1
    and (($n | .spans |= sort_by(.spanId)) as $ns | links($ns; $c[0]; $c[0].spans[0])))' \
    "nginx refs -> curl exits"
check "$JQDEFS"' all(seg("e2e-tlspy")[]; . as $p
    | (seg("e2e-tlsnginx") | map(select(.traceId == $p.traceId))) as $n | ($n | length) == 1
    and ($n[0].spans | map(select(.spanId == 1))[0]) as $x
    | ($p.spans | length) == 1 and ($p.spans[0] | .spanType == "Entry"
        and http_span("GET:/api/orders.json"; "200") and (tag("url") | startswith("https://")))
    and links($p; $n[0]; $x))' "backend refs -> nginx exits"

# The sw8 lines the backend's handler saw: the agent's, naming nginx's segments and exit spans.
[ "$(lines "$T/tlspy.sw8")" = 3 ] || fail "backend saw $(lines "$T/tlspy.sw8") requests"
while read -r v; do
    [ "$v" != - ] || fail "the backend received no sw8"
    read -r tid sid span <<<"$(sw8_fields "$v")"
    check "$JQDEFS"' any(seg("e2e-tlsnginx")[]; .traceId == "'"$tid"'"
        and .traceSegmentId == "'"$sid"'") and '"$span"' == 1' "backend's sw8 $v is nginx's exit"
done <"$T/tlspy.sw8"
echo "ok tls_nginx"
