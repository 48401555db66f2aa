#!/usr/bin/env bash
# tls_bad.sh - bad TLS input changes nothing for the host: garbage instead of a ClientHello,
# plaintext HTTP to a TLS port, a record cut short and the connection closed, a partial head
# and a close, a client-initiated renegotiation, and a server certificate the client does not
# trust; and requests in flight when the peer resets the connection (error spans with a log). Each is sent to a traced and to an untraced copy of the same server (nginx `listen
# ssl`; tls_server.py) or made by a traced and an untraced client (curl, Python): what comes
# back, exit codes and messages are the same. Nothing is recorded for the connections that
# carried no request (the plaintext request nginx answers with 400 is one); a good request
# afterwards is traced as usual, and no process crashed.
E2E_NAME=tls_bad
. "$E2E_DIR/lib.sh"
. "$E2E_DIR/tls_lib.sh"
command -v nginx >/dev/null || { echo "FAIL: nginx not installed" >&2; exit 1; }
e2e_init
start_stub
tls_certs

# Two nginx (traced, untraced) and two tls_server.py (traced, untraced).
NT=$(free_port)
NU=$(free_port)
ngx_server() {
    echo "    server {
        listen 127.0.0.1:$1 ssl;
        ssl_certificate $T/tls/srv.pem;
        ssl_certificate_key $T/tls/srv.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        location / { return 200 \"ok\n\"; }
    }"
}
mkdir -p "$T/ngxu"
nginx_conf "$(ngx_server "$NU")" "worker_processes 1;"
sed -e "s#$T/ngx/#$T/ngxu/#g" "$T/ngx/nginx.conf" >"$T/ngxu/nginx.conf"
nginx_conf "$(ngx_server "$NT")" "worker_processes 1;"
env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=e2e-badnginx nginx -c "$T/ngx/nginx.conf" -p "$T/ngx" -g 'daemon off;' >"$T/nginx.out" 2>&1 &
PIDS="$PIDS $!"
nginx -c "$T/ngxu/nginx.conf" -p "$T/ngxu" -g 'daemon off;' >"$T/nginxu.out" 2>&1 &
PIDS="$PIDS $!"
start_tls_backend e2e-badpy
PT=$TLSPY
start_server tlspyu python3 -u "$E2E_DIR/tls_server.py" "$T/tls/srv.pem" "$T/tls/srv.key" "$T/tlspyu.sw8"
PU=$PORT
for p in $NT $NU; do
    wait_for "(exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null" 10 || fail "nginx on $p did not start"
done
T_START=$(now_ms)

# Server side: the same bad input to the traced and the untraced copy.
for c in garbage plain midrecord half; do
    for pair in "$NT $NU nginx" "$PT $PU python"; do
        read -r t u name <<<"$pair"
        python3 "$E2E_DIR/tls_bad_client.py" "$c" "$t" >"$T/bad-$c-$name.t" 2>&1
        python3 "$E2E_DIR/tls_bad_client.py" "$c" "$u" >"$T/bad-$c-$name.u" 2>&1
        cmp -s "$T/bad-$c-$name.t" "$T/bad-$c-$name.u" ||
            fail "$c to $name: traced server answered $(cat "$T/bad-$c-$name.t"), untraced $(cat "$T/bad-$c-$name.u")"
    done
done

# Client-initiated renegotiation (TLS 1.2; "R" asks s_client to renegotiate).
reneg() {
    { printf 'R\n'; sleep 1; } | timeout 10 openssl s_client -connect "127.0.0.1:$1" -tls1_2 \
        -CAfile "$T/tls/ca.pem" 2>&1 | grep -E '^(RENEGOTIATING|HTTP/|Verify return code)|:error:' |
        sed 's/^[0-9A-F]*:error:/error:/'
}
for pair in "$NT $NU nginx" "$PT $PU python"; do
    read -r t u name <<<"$pair"
    [ "$(reneg "$t")" = "$(reneg "$u")" ] || fail "renegotiation with $name: $(reneg "$t") vs $(reneg "$u")"
done

# Client side: a certificate the client does not trust, traced and untraced clients.
untrusted() {
    "$@" curl -sS --cacert "$T/tls/other.pem" "https://127.0.0.1:$NU/" 2>&1
    echo "rc=$?"
    "$@" python3 -c '
import ssl, sys, urllib.request
c = ssl.create_default_context(cafile=sys.argv[1])
try:
    urllib.request.urlopen("https://127.0.0.1:%s/" % sys.argv[2], context=c)
except Exception as e:
    print(type(e).__name__, e)' "$T/tls/other.pem" "$NU" 2>&1
}
[ "$(untrusted env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=e2e-badclient)" = "$(untrusted env)" ] ||
    fail "untrusted certificate: traced clients differ: $(untrusted env LD_PRELOAD="$SWAGENT_LIB")"

# Requests in flight when the peer resets: error spans with a log, the hosts unharmed.
# Server side: a whole request to the traced Python server, reset before its answer (/slow).
python3 "$E2E_DIR/tls_bad_client.py" reset "$PT" >"$T/reset.out" 2>&1 || fail "reset client: $(cat "$T/reset.out")"
# Client side: traced curl to a TLS server that resets after reading the request head.
start_server rst python3 -u "$E2E_DIR/tls_bad_client.py" rst-server 0 "$T/tls/srv.pem" "$T/tls/srv.key"
RST_PID=$LAST_PID # serves one connection, then exits
traced e2e-rstcurl curl -sS --cacert "$T/tls/ca.pem" "https://127.0.0.1:$PORT/x" >"$T/rstcurl.out" 2>&1 &&
    fail "curl through a reset succeeded"

# A good request to each traced server afterwards.
[ "$(traced e2e-goodcurl curl -sS --cacert "$T/tls/ca.pem" "https://127.0.0.1:$NT/")" = ok ] ||
    fail "good request to nginx"
curl -sS --cacert "$T/tls/ca.pem" "https://127.0.0.1:$PT/good" >/dev/null || fail "good request to python"

# Recorded: the good requests, the plaintext request nginx itself answered (400, "The plain
# HTTP request was sent to HTTPS port": nginx serves it as HTTP, so it is a request), and the
# two requests in flight at a reset (errors, no status); nothing for the connections that
# carried none.
wait_segments 6
T_END=$(now_ms)
check 'length == 6' "only the requests are recorded"
check "$JQDEFS"' [$s[] | .spans[0] | [.spanType, .operationName, tag("http.status_code"), .isError]]
    as $x | [$s[].service] as $v | [$v, $x] | transpose | sort ==
    [["e2e-badnginx", ["Entry", "GET:/", "200", false]],
     ["e2e-badnginx", ["Entry", "GET:/api", "400", true]],
     ["e2e-badpy", ["Entry", "GET:/good", "200", false]],
     ["e2e-badpy", ["Entry", "GET:/slow", null, true]],
     ["e2e-goodcurl", ["Exit", "GET:/", "200", false]],
     ["e2e-rstcurl", ["Exit", "GET:/x", null, true]]]' "the requests' spans"
check "$JQDEFS"' [$s[] | .spans[0] | select(.isError and tag("http.status_code") == null)
    | .logs | length > 0 and ([.[0].data[] | select(.key == "error.kind") | .value][0]
        | . == "ECONNRESET" or . == "EPIPE")] == [true, true]' \
    "the requests in flight at a reset are error spans with a log saying so"
grep -q "exited on signal" "$T/ngx/error.log" && fail "an nginx worker crashed"
for p in $PIDS; do [ "$p" = "$RST_PID" ] || kill -0 "$p" 2>/dev/null || fail "process $p is gone"; done
echo "ok tls_bad"
