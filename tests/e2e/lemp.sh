#!/usr/bin/env bash
# lemp.sh - the LEMP stack from Debian's packages: curl -> nginx (fastcgi_pass, to PHP-FPM's Unix
# socket and to its TCP pool) -> PHP-FPM -> PHP pages using PDO on MariaDB (a query and a real
# server-side prepared statement; an SQL error answered with a 500) and php-redis on Redis (a SET
# and a GET), and a page without database (POST bodies up to 1 MiB, a 404 with its own Status). The same requests go to the stack run
# without the agent, then to the stack (nginx, PHP-FPM, MariaDB and curl) run under it: every
# response (status line, headers but Date, body) must be the same byte for byte.
E2E_NAME=lemp
. "$E2E_DIR/lib.sh"
. "$E2E_DIR/lemp_lib.sh"
. "$E2E_DIR/../db/dblib.sh"
need_lemp_tools mariadb mariadb-install-db mariadbd php-fpm8.2 nginx curl jq redis-server
php-fpm8.2 -m | grep -qx redis || fail "php-fpm8.2 has no redis extension (php-redis, scripts/deps.sh)"
e2e_init
start_stub
start_mariadb traced
start_redis
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
grep -q '^items=3 name=pear price=0.75' "$T/bare.1.txt" && grep -q '^cached=pear' "$T/bare.1.txt" ||
    fail "items.php: $(cat "$T/bare.1.txt")"
grep -q '^HTTP/1.1 500' "$T/bare.2.txt" && grep -q '^error: 42S02' "$T/bare.2.txt" ||
    fail "items.php?fail: $(cat "$T/bare.2.txt")"
grep -q '^HTTP/1.1 404' "$T/bare.3.txt" || fail "hello.php?missing: $(cat "$T/bare.3.txt")"
grep -q '^items=3 name=apple price=0.50' "$T/bare.4.txt" && grep -q '^cached=apple' "$T/bare.4.txt" ||
    fail "tcp items.php: $(cat "$T/bare.4.txt")"
grep -q '^hello POST 1048576' "$T/bare.6.txt" && grep -q '^hello POST 1048576' "$T/bare.7.txt" ||
    fail "POST bodies: $(tail -1 "$T/bare.6.txt") / $(tail -1 "$T/bare.7.txt")"
kill -0 "$FPM_PID" 2>/dev/null && kill -0 "$DB_PID" 2>/dev/null || fail "a traced server died"

# One trace per request, three segments each: curl's exit; nginx's entry and its FastCGI exit
# (peer the socket path, or 127.0.0.1:port for the TCP pool); PHP-FPM's entry, a child of that
# exit (HTTP_SW8 inserted by nginx's agent wins over the curl sw8 nginx forwards), with the
# page's statements as its Database children and its Redis commands as its Cache children, in
# the order the page made them, each inside the entry's time and after the one before it.
# MariaDB, traced too, makes no segment (redis-server runs untraced).
wait_segments $((3 * N_REQ)) 30
T_END=$(now_ms)
check "length == $((3 * N_REQ))" "3 segments per request"
check "$JQDEFS"' all($s[]; root0) and all($s[].spans[]; sane_times)' "roots and times"
check "$JQDEFS"' [$s[].service] | unique == ["e2e-curl", "e2e-nginx", "e2e-php"]' "services"
check "$JQDEFS"'
def byid(sg; i): sg.spans | map(select(.spanId == i))[0];
def ofsvc(g; svc): [g[] | select(.service == svc) | .spans |= sort_by(.spanId)];
[group_by(.traceId)[] | . as $g | ofsvc($g; "e2e-curl") as $c | ofsvc($g; "e2e-nginx") as $n
  | ofsvc($g; "e2e-php") as $p
  | ($c | length) == 1 and ($n | length) == 1 and ($p | length) == 1
  and ($c[0].spans[0] | .spanType == "Exit") as $ce
  | $c[0].spans[0] as $cx | byid($n[0]; 0) as $ne | byid($n[0]; 1) as $nx | byid($p[0]; 0) as $pe
  | $ce and ($n[0].spans | length) == 2 and links($n[0]; $c[0]; $cx)
    and $ne.spanType == "Entry" and $nx.spanType == "Exit" and $nx.parentSpanId == 0
    and $nx.operationName == $ne.operationName
    and ($nx.peer == "unix:'"$FPM_SOCK"'" or $nx.peer == "127.0.0.1:'"$FPM_PORT"'")
    and (($nx.peer == "127.0.0.1:'"$FPM_PORT"'") == ($ne.operationName | startswith("GET:/tcp/") or startswith("POST:/tcp/")))
    and ($pe.spanType == "Entry") and links($p[0]; $n[0]; $nx)
    and $pe.operationName == $ne.operationName
    and ($pe | http_span($ne.operationName; $ne | tag("http.status_code")))
    and ($nx | http_span($ne.operationName; $ne | tag("http.status_code")))
    and all($p[0].spans[] | select(.spanId != 0); .parentSpanId == 0 and .spanType == "Exit"
        and ((.componentId == 5 and .spanLayer == "Database" and .peer == "unix:'"$DB_SOCK"'"
              and tag("db.instance") == "shop")
          or (.componentId == 7 and .spanLayer == "Cache" and .peer == "127.0.0.1:'"$RP"'"
              and tag("cache.type") == "Redis")))
    and ([$p[0].spans[] | select(.spanId != 0)] as $x | all(range(1; $x | length);
        ($x[.].startTime | tonumber) >= ($x[. - 1].endTime | tonumber))
        and all($x[]; (.startTime | tonumber) >= ($pe.startTime | tonumber)
            and (.endTime | tonumber) <= ($pe.endTime | tonumber)))
] | length == '"$N_REQ"' and all' "each trace: curl -> nginx entry -> FastCGI exit -> PHP-FPM entry -> DB and cache exits, in order"
# The pages with a database: PDO with emulated prepares off prepares and executes even its
# query(): the count, then the item, each a Prepare and an Execute with its statement; then
# php-redis's SET and GET of the item's key; the failing page's prepare on a missing table
# after them an error span, and the page a 500.
check "$JQDEFS"' [$s[] | select(.service == "e2e-php") | .spans |= sort_by(.spanId)
    | select(.spans[0].operationName == "GET:/items.php" or .spans[0].operationName == "GET:/tcp/items.php")]
    | length == 3 and all(.[]; (.spans[0] | tag("url") | capture("id=(?<i>[0-9]+)").i) as $id
        | [.spans[] | select(.spanId != 0) | [.operationName, tag("db.statement") // tag("cache.key"),
            tag("cache.op"), .isError]]
        | .[0:6] == [["Mysql/Prepare", "SELECT COUNT(*) FROM items", null, false],
                     ["Mysql/Execute", "SELECT COUNT(*) FROM items", null, false],
                     ["Mysql/Prepare", "SELECT name, price FROM items WHERE id = ?", null, false],
                     ["Mysql/Execute", "SELECT name, price FROM items WHERE id = ?", null, false],
                     ["Redis/SET", "item:\($id)", "write", false],
                     ["Redis/GET", "item:\($id)", "read", false]])
    and (map(.spans | length) | sort) == [7, 7, 8]' "items.php statements and cache commands, in order"
check "$JQDEFS"' [$s[] | select(.service == "e2e-php") | select(.spans | length == 8)] as $fs
    | ($fs | length) == 1 and ($fs[0] as $f
    | ($f.spans[] | select(.spanId == 0) | http_span("GET:/items.php"; "500"))
    and ($f.spans[] | select(.spanId == 7) | .operationName == "Mysql/Prepare" and .isError
        and tag("db.statement") == "SELECT * FROM missing_table"))' "the failing page"
check "$JQDEFS"' [$s[] | select(.service == "e2e-php") | .spans[] | select(.spanId == 0 and .operationName == "GET:/hello.php")
    | tag("http.status_code")] == ["404"]' "hello.php 404 from Status:"
echo "ok lemp (responses identical under the agent; $N_REQ traces curl -> nginx -> PHP-FPM -> MariaDB + Redis)"
