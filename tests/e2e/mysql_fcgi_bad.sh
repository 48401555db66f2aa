#!/usr/bin/env bash
# mysql_fcgi_bad.sh - servers that misbehave (tests/e2e/proto_bad.py, not traced): a MySQL server
# that closes in the middle of a result set, one that greets with bytes that are no MySQL
# greeting, and a FastCGI server behind nginx that closes in the middle of its STDOUT (nginx
# passes on the half it got). The clients (PyMySQL; curl -> nginx) print the same without and
# with the agent; the statement cut short is an error span (`closed`), the junk server makes
# no span at all, nginx's FastCGI exit to the server that closed is an error span. Two servers
# make the modules give up: a MySQL server sending a packet no command asked for, a FastCGI
# server answering with records of version 2: each connection is then left alone, and the
# agent's log says so (module, peer, reason). HTTP/1.x too: a server answering a request with
# a line that is not HTTP; the client's give-up is counted (given_up=1 in `swagent status`
# while it runs) and logged the same way.
E2E_NAME=mysql_fcgi_bad
. "$E2E_DIR/lib.sh"
. "$E2E_DIR/lemp_lib.sh"
need_lemp_tools nginx curl jq
e2e_init
PY3=/usr/bin/python3
$PY3 -c 'import pymysql' 2>/dev/null || fail "python3-pymysql not installed (scripts/deps.sh)"
start_stub
for m in mysql-cut mysql-junk mysql-extra fcgi-cut fcgi-v2 http-junk; do
    $PY3 "$E2E_DIR/proto_bad.py" "$m" "$T/$m.port" >"$T/$m.out" 2>&1 &
    PIDS="$PIDS $!"
    wait_for "[ -s '$T/$m.port' ]" 10 || fail "$m did not start"
done
CUT=$(cat "$T/mysql-cut.port") JUNK=$(cat "$T/mysql-junk.port") EXTRA=$(cat "$T/mysql-extra.port")
FC=$(cat "$T/fcgi-cut.port") FV2=$(cat "$T/fcgi-v2.port")
cat >"$T/client.py" <<'PY'
import sys, pymysql
for port in map(int, sys.argv[1:]):
    try:
        c = pymysql.connect(host="127.0.0.1", port=port, user="u", password="p",
                            connect_timeout=5, read_timeout=5)
        cur = c.cursor()
        cur.execute("SELECT a FROM t")
        print("rows", cur.fetchall())
    except pymysql.MySQLError as e:
        print("error", e.args[0])
    except Exception as e:  # PyMySQL's own parser fails on the junk greeting
        print("error", type(e).__name__)
PY
NG=$(free_port)
# The worker keeps our uid (as root: `user root;`), so its log is the test's ($T/run).
top=("worker_processes 1;")
[ "$(id -u)" = 0 ] && top+=("user root;")
nginx_conf "    server {
        listen 127.0.0.1:$NG;
        location / {
            include /etc/nginx/fastcgi_params;
            fastcgi_pass 127.0.0.1:$FC;
        }
        location /v2/ {
            include /etc/nginx/fastcgi_params;
            fastcgi_pass 127.0.0.1:$FV2;
        }
    }" "${top[@]}"

run() { # NAME [traced]
    local pre=()
    [ "${2:-}" = traced ] && pre=(env LD_PRELOAD="$SWAGENT_LIB")
    SW_AGENT_NAME=e2e-pymysql "${pre[@]}" $PY3 "$T/client.py" "$CUT" "$JUNK" "$EXTRA" >"$T/$1.py.txt" 2>&1
    SW_AGENT_NAME=e2e-nginx "${pre[@]}" nginx -c "$T/ngx/nginx.conf" -p "$T/ngx" -g 'daemon off;' \
        >"$T/nginx.out" 2>&1 &
    local ngpid=$!
    PIDS="$PIDS $ngpid"
    wait_for "(exec 3<>/dev/tcp/127.0.0.1/$NG) 2>/dev/null" 10 || fail "nginx did not start"
    SW_AGENT_NAME=e2e-curl "${pre[@]}" curl -sS -i "http://127.0.0.1:$NG/page.php" |
        grep -av '^\(Date\|Server\):' >"$T/$1.curl.txt"
    SW_AGENT_NAME=e2e-curl "${pre[@]}" curl -sS -i "http://127.0.0.1:$NG/v2/page.php" |
        grep -av '^\(Date\|Server\):' >"$T/$1.curlv2.txt"
    kill "$ngpid"
    wait_for "! kill -0 $ngpid 2>/dev/null" 10 || fail "nginx did not stop"
}

run bare
T_START=$(now_ms)
run traced traced
for f in py curl curlv2; do
    cmp -s "$T/bare.$f.txt" "$T/traced.$f.txt" ||
        fail "$f output differs under the agent: $(diff -a "$T/bare.$f.txt" "$T/traced.$f.txt" | head -6)"
done
grep -q '^error 2013$' "$T/bare.py.txt" || fail "the cut result set: $(cat "$T/bare.py.txt")"
[ "$(grep -c '^error' "$T/bare.py.txt")" = 3 ] || fail "the junk and extra servers: $(cat "$T/bare.py.txt")"
grep -q "^HTTP/1.1 502" "$T/bare.curlv2.txt" || fail "nginx, FastCGI version 2: $(head -1 "$T/bare.curlv2.txt")"
grep -q "^HTTP/1.1 200" "$T/bare.curl.txt" && grep -q "^half of a" "$T/bare.curl.txt" ||
    fail "nginx: $(head -1 "$T/bare.curl.txt")"

# PyMySQL: two segments (its SET AUTOCOMMIT, answered; the statement cut short: an error span);
# the junk server none, the extra-packet server none (given up on before any command). nginx:
# its FastCGI exit to the server that closed mid-STDOUT an error span, its entry the 200 whose
# head nginx had already sent; its exit to the version-2 server an error span (not followed),
# the entry nginx's 502. curl: its two exits.
wait_segments 6
T_END=$(now_ms)
check 'length == 6' "6 segments"
check "$JQDEFS"' [seg("e2e-pymysql")[].spans[]] | length == 2
    and all(.[]; .operationName == "Mysql/Query" and .peer == "127.0.0.1:'"$CUT"'")
    and (map(select(tag("db.statement") == "SET AUTOCOMMIT = 0"))[0].isError | not)
    and (map(select(tag("db.statement") == "SELECT a FROM t"))[0] | .isError
        and (.logs[0].data | map(select(.key == "error.kind"))[0].value) == "closed")' \
    "the statement cut short: an error span; none for the junk server"
check "$JQDEFS"' [seg("e2e-nginx")[] | select(any(.spans[]; .peer == "127.0.0.1:'"$FC"'"))] | length == 1
    and (.[0].spans | length == 2
    and (map(select(.spanType == "Exit"))[0] | .peer == "127.0.0.1:'"$FC"'" and .isError
        and (.logs[0].data | map(select(.key == "error.kind"))[0].value) == "closed")
    and (map(select(.spanType == "Entry"))[0] | tag("http.status_code") == "200"))' \
    "nginx: the FastCGI exit an error, the entry the 200 it sent"
check "$JQDEFS"' [seg("e2e-nginx")[] | select(any(.spans[]; .peer == "127.0.0.1:'"$FV2"'"))] | length == 1
    and (.[0].spans | length == 2
    and (map(select(.spanType == "Exit"))[0] | .isError
        and (.logs[0].data | map(select(.key == "message"))[0].value | test("version")))
    and (map(select(.spanType == "Entry"))[0] | tag("http.status_code") == "502"))' \
    "nginx: the FastCGI exit to the version-2 server an error (not followed), the entry its 502"
check "$JQDEFS"' seg("e2e-curl") | length == 2' "curl"
# The give-ups, in the agent's log: module, peer, reason.
grep -hq "WARN swagent\[[0-9]*\]: mysql: 127.0.0.1:$EXTRA: .*: connection no longer followed" "$T"/run/*.log ||
    fail "no MySQL give-up line: $(grep -h 'no longer followed' "$T"/run/*.log)"
grep -hq "WARN swagent\[[0-9]*\]: fastcgi: 127.0.0.1:$FV2: not FastCGI version 1: connection no longer followed" \
    "$T"/run/*.log || fail "no FastCGI give-up line: $(grep -h 'no longer followed' "$T"/run/*.log)"

# HTTP/1.x: a traced client whose request is answered by a line that is not HTTP.
HJ=$(cat "$T/http-junk.port")
cat >"$T/http_client.py" <<'PY'
import os, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"GET /junk HTTP/1.1\r\nHost: junk\r\n\r\n")
print("got", s.recv(4096), flush=True)
for _ in range(200):  # until the test has read `swagent status` (at most 20 s)
    if os.path.exists(sys.argv[2]):
        break
    time.sleep(0.1)
s.close()
PY
env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=e2e-http-junk $PY3 "$T/http_client.py" "$HJ" \
    "$T/http.release" >"$T/http_client.out" 2>&1 &
HPID=$!
PIDS="$PIDS $HPID"
wait_for "grep -q '^got' '$T/http_client.out'" 10 || fail "the HTTP client: $(cat "$T/http_client.out")"
"$SWAGENT_CLI" status --runtime-dir "$T/run" >"$T/status.out" 2>&1 || fail "swagent status failed"
touch "$T/http.release"
wait "$HPID" || fail "the HTTP client failed: $(cat "$T/http_client.out")"
grep -q "^got b'SSH-2.0-not-http" "$T/http_client.out" || fail "the HTTP client: $(cat "$T/http_client.out")"
grep "pid $HPID live .*service=e2e-http-junk " "$T/status.out" | grep -q ' given_up=1$' ||
    fail "swagent status: no given_up=1 for pid $HPID: $(cat "$T/status.out")"
grep -hq "WARN swagent\[$HPID\]: http1: 127.0.0.1:$HJ: response is not HTTP/1.x: connection no longer followed" \
    "$T"/run/*.log || fail "no HTTP/1.x give-up line: $(grep -h 'no longer followed' "$T"/run/*.log)"
echo "ok mysql_fcgi_bad"
