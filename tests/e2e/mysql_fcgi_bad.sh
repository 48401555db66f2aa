#!/usr/bin/env bash
# mysql_fcgi_bad.sh - servers that misbehave (tests/e2e/proto_bad.py, not traced): a MySQL server
# that closes in the middle of a result set, one that greets with bytes that are no MySQL
# greeting, and a FastCGI server behind nginx that closes in the middle of its STDOUT (nginx
# passes on the half it got). The clients (PyMySQL; curl -> nginx) print the same without and
# with the agent; the statement cut short is an error span (`closed`), the junk server makes
# no span at all, nginx's FastCGI exit to the server that closed is an error span.
E2E_NAME=mysql_fcgi_bad
. "$E2E_DIR/lib.sh"
. "$E2E_DIR/lemp_lib.sh"
need_lemp_tools nginx curl jq
e2e_init
PY3=/usr/bin/python3
$PY3 -c 'import pymysql' 2>/dev/null || fail "python3-pymysql not installed (scripts/deps.sh)"
start_stub
for m in mysql-cut mysql-junk fcgi-cut; do
    $PY3 "$E2E_DIR/proto_bad.py" "$m" "$T/$m.port" >"$T/$m.out" 2>&1 &
    PIDS="$PIDS $!"
    wait_for "[ -s '$T/$m.port' ]" 10 || fail "$m did not start"
done
CUT=$(cat "$T/mysql-cut.port") JUNK=$(cat "$T/mysql-junk.port") FC=$(cat "$T/fcgi-cut.port")
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
nginx_conf "    server {
        listen 127.0.0.1:$NG;
        location / {
            include /etc/nginx/fastcgi_params;
            fastcgi_pass 127.0.0.1:$FC;
        }
    }" "worker_processes 1;"

run() { # NAME [traced]
    local pre=()
    [ "${2:-}" = traced ] && pre=(env LD_PRELOAD="$SWAGENT_LIB")
    SW_AGENT_NAME=e2e-pymysql "${pre[@]}" $PY3 "$T/client.py" "$CUT" "$JUNK" >"$T/$1.py.txt" 2>&1
    SW_AGENT_NAME=e2e-nginx "${pre[@]}" nginx -c "$T/ngx/nginx.conf" -p "$T/ngx" -g 'daemon off;' \
        >"$T/nginx.out" 2>&1 &
    local ngpid=$!
    PIDS="$PIDS $ngpid"
    wait_for "(exec 3<>/dev/tcp/127.0.0.1/$NG) 2>/dev/null" 10 || fail "nginx did not start"
    SW_AGENT_NAME=e2e-curl "${pre[@]}" curl -sS -i "http://127.0.0.1:$NG/page.php" |
        grep -av '^\(Date\|Server\):' >"$T/$1.curl.txt"
    kill "$ngpid"
    wait_for "! kill -0 $ngpid 2>/dev/null" 10 || fail "nginx did not stop"
}

run bare
T_START=$(now_ms)
run traced traced
for f in py curl; do
    cmp -s "$T/bare.$f.txt" "$T/traced.$f.txt" ||
        fail "$f output differs under the agent: $(diff -a "$T/bare.$f.txt" "$T/traced.$f.txt" | head -6)"
done
grep -q '^error 2013$' "$T/bare.py.txt" || fail "the cut result set: $(cat "$T/bare.py.txt")"
[ "$(grep -c '^error' "$T/bare.py.txt")" = 2 ] || fail "the junk server: $(cat "$T/bare.py.txt")"
grep -q "^HTTP/1.1 200" "$T/bare.curl.txt" && grep -q "^half of a" "$T/bare.curl.txt" ||
    fail "nginx: $(head -1 "$T/bare.curl.txt")"

# PyMySQL: two segments (its SET AUTOCOMMIT, answered; the statement cut short: an error span);
# the junk server none. nginx: its FastCGI exit to the server that closed mid-STDOUT an error
# span, its entry the 200 whose head nginx had already sent. curl: its exit.
wait_segments 4
T_END=$(now_ms)
check 'length == 4' "4 segments"
check "$JQDEFS"' [seg("e2e-pymysql")[].spans[]] | length == 2
    and all(.[]; .operationName == "Mysql/Query" and .peer == "127.0.0.1:'"$CUT"'")
    and (map(select(tag("db.statement") == "SET AUTOCOMMIT = 0"))[0].isError | not)
    and (map(select(tag("db.statement") == "SELECT a FROM t"))[0] | .isError
        and (.logs[0].data | map(select(.key == "error.kind"))[0].value) == "closed")' \
    "the statement cut short: an error span; none for the junk server"
check "$JQDEFS"' seg("e2e-nginx")[0].spans | length == 2
    and (map(select(.spanType == "Exit"))[0] | .peer == "127.0.0.1:'"$FC"'" and .isError
        and (.logs[0].data | map(select(.key == "error.kind"))[0].value) == "closed")
    and (map(select(.spanType == "Entry"))[0] | tag("http.status_code") == "200")' \
    "nginx: the FastCGI exit an error, the entry the 200 it sent"
check "$JQDEFS"' seg("e2e-curl") | length == 1' "curl"
echo "ok mysql_fcgi_bad"
