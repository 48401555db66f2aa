#!/usr/bin/env bash
# lemp.sh - the LEMP stack from Debian's packages: curl -> nginx (fastcgi_pass, to PHP-FPM's Unix
# socket and to its TCP pool) -> PHP-FPM -> PHP pages using PDO on MariaDB (a query and a real
# server-side prepared statement; an SQL error answered with a 500), and a page without database
# (POST bodies up to 1 MiB, a 404 with its own Status). The same requests go to the stack run
# without the agent, then to the stack (nginx, PHP-FPM, MariaDB and curl) run under it: every
# response (status line, headers but Date, body) must be the same byte for byte.
E2E_NAME=lemp
. "$E2E_DIR/lib.sh"
. "$E2E_DIR/lemp_lib.sh"
need_lemp_tools mariadb mariadb-install-db mariadbd php-fpm8.2 nginx curl jq
e2e_init
start_stub
start_mariadb traced
lemp_www
head -c 1048576 /dev/urandom >"$T/body.bin"

# requests NAME [traced]: each request's response into $T/NAME.N.txt (Date and Server dropped).
requests() {
    local p=$1 pre=() i=0 u
    [ "${2:-}" = traced ] && pre=(env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=e2e-curl)
    for u in "/items.php?id=2" "/items.php?id=3&fail=1" "/hello.php?missing=1" \
        "/tcp/items.php?id=1" "/tcp/hello.php"; do
        i=$((i + 1))
        "${pre[@]}" curl -sS -i "http://127.0.0.1:$NG$u" | grep -av '^\(Date\|Server\):' \
            >"$T/$p.$i.txt" || fail "curl $u"
    done
    for u in /hello.php /tcp/hello.php; do
        i=$((i + 1))
        "${pre[@]}" curl -sS -i -H "Content-Type: application/octet-stream" --data-binary "@$T/body.bin" "http://127.0.0.1:$NG$u" |
            grep -av '^\(Date\|Server\):' >"$T/$p.$i.txt" || fail "curl POST $u"
    done
    N_REQ=$i
}

# stop_stack: nginx and PHP-FPM of the bare run, by PID (their children exit with them).
stop_stack() {
    local p n=0
    for p in "$FPM_PID" "$(cat "$T/ngx/x.nginx.pid")"; do kill "$p" 2>/dev/null; done
    while kill -0 "$FPM_PID" 2>/dev/null || [ -e "$T/ngx/x.nginx.pid" ]; do
        n=$((n + 1))
        [ $n -gt 100 ] && fail "the bare stack did not stop"
        sleep 0.1
    done
    rm -f "$FPM_SOCK"
}

start_php_fpm
start_lemp_nginx
requests bare
stop_stack

T_START=$(now_ms)
start_php_fpm traced
start_lemp_nginx traced
requests traced traced
for i in $(seq 1 "$N_REQ"); do
    cmp -s "$T/bare.$i.txt" "$T/traced.$i.txt" ||
        fail "response $i differs under the agent: $(diff -a "$T/bare.$i.txt" "$T/traced.$i.txt" | head -6)"
done
# The responses are what the pages do (not two equally broken runs).
grep -q '^items=3 name=pear price=0.75' "$T/bare.1.txt" || fail "items.php: $(cat "$T/bare.1.txt")"
grep -q '^HTTP/1.1 500' "$T/bare.2.txt" && grep -q '^error: 42S02' "$T/bare.2.txt" ||
    fail "items.php?fail: $(cat "$T/bare.2.txt")"
grep -q '^HTTP/1.1 404' "$T/bare.3.txt" || fail "hello.php?missing: $(cat "$T/bare.3.txt")"
grep -q '^items=3 name=apple price=0.50' "$T/bare.4.txt" || fail "tcp items.php: $(cat "$T/bare.4.txt")"
grep -q '^hello POST 1048576' "$T/bare.6.txt" && grep -q '^hello POST 1048576' "$T/bare.7.txt" ||
    fail "POST bodies: $(tail -1 "$T/bare.6.txt") / $(tail -1 "$T/bare.7.txt")"
kill -0 "$FPM_PID" 2>/dev/null && kill -0 "$DB_PID" 2>/dev/null || fail "a traced server died"
echo "ok lemp (responses identical under the agent)"
