#!/usr/bin/env bash
# mariadb.sh - a real MariaDB server (its own datadir, loopback port and Unix socket) and real
# clients: the `mariadb` command-line client over TCP and over the socket (queries, `use`, an
# error, a 1 MiB statement), python3-pymysql (queries, executemany, an error, a 17 MiB value:
# packets of 16 MiB and more both ways) and PHP's PDO with server-side prepared statements
# (COM_STMT_PREPARE / EXECUTE). Each client runs without the agent, then under it: what each
# prints must be the same byte for byte, and the server runs under the agent throughout.
E2E_NAME=mariadb
. "$E2E_DIR/lib.sh"
. "$E2E_DIR/lemp_lib.sh"
need_lemp_tools mariadb mariadb-install-db mariadbd php jq
e2e_init
# Debian's python3 (python3-pymysql is a Debian package; another python3 may come first on PATH).
PY3=/usr/bin/python3
$PY3 -c 'import pymysql' 2>/dev/null || fail "python3-pymysql not installed (scripts/deps.sh)"
start_stub
start_mariadb traced

# The 1 MiB statement and the client scripts.
python3 - "$T/big.sql" <<'PY'
import sys
v = "x" * (1 << 20)
open(sys.argv[1], "w").write("SELECT LENGTH('%s') AS big_len;\n" % v)
PY
cat >"$T/cli.sql" <<'SQL'
use shop;
SELECT id, name, price FROM items ORDER BY id;
SELECT * FROM missing_table;
SELECT COUNT(*) AS n FROM items WHERE price > 0.6;
SQL
cat >"$T/client.py" <<'PY'
import sys, pymysql
port, sock = int(sys.argv[1]), sys.argv[2]
for kw in ({"host": "127.0.0.1", "port": port}, {"unix_socket": sock}):
    c = pymysql.connect(user="app", password="apppw", database="shop",
                        max_allowed_packet=64 << 20, **kw)
    with c.cursor() as cur:
        cur.execute("SELECT name FROM items WHERE id = %s", (2,))
        print(cur.fetchall())
        cur.execute("CREATE TEMPORARY TABLE t (k INT, v LONGBLOB)")
        cur.executemany("INSERT INTO t VALUES (%s, %s)", [(1, b"a\x00\xff"), (2, b"b")])
        cur.execute("INSERT INTO t VALUES (3, %s)", (b"\xfe" * (17 << 20),))
        cur.execute("SELECT k, LENGTH(v), HEX(LEFT(v, 3)) FROM t ORDER BY k")
        print(cur.fetchall())
        cur.execute("SELECT v FROM t WHERE k = 3")
        big = cur.fetchone()[0]
        print(len(big), big[:2] == b"\xfe\xfe")
        try:
            cur.execute("SELECT nope FROM items")
        except pymysql.MySQLError as e:
            print("error", e.args[0])
        cur.execute("SELECT 1")
        print(cur.fetchall())
    c.close()
PY
cat >"$T/pdo.php" <<PHP
<?php
foreach (['mysql:host=127.0.0.1;port=$DB_PORT;dbname=shop', 'mysql:unix_socket=$DB_SOCK;dbname=shop'] as \$dsn) {
    \$db = new PDO(\$dsn, 'app', 'apppw',
        [PDO::ATTR_EMULATE_PREPARES => false, PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]);
    \$st = \$db->prepare('SELECT name, price FROM items WHERE id = ? OR name = ?');
    foreach ([[1, 'plum'], [2, 'none']] as \$args) {
        \$st->execute(\$args);
        echo json_encode(\$st->fetchAll(PDO::FETCH_NUM)), "\n";
    }
    \$db->exec('CREATE TEMPORARY TABLE tmp (id INT, name VARCHAR(10), price DECIMAL(8,2))');
    \$ins = \$db->prepare('INSERT INTO tmp VALUES (?, ?, ?)');
    \$ins->execute([9, 'fig', 2.5]);
    echo "inserted ", \$ins->rowCount(), "\n";
    try { \$db->prepare('SELECT * FROM missing_table')->execute(); }
    catch (PDOException \$e) { echo "error ", \$e->getCode(), "\n"; }
}
PHP

run_clients() { # OUT_PREFIX [traced]
    local p=$1 pre=()
    [ "${2:-}" = traced ] && pre=(env LD_PRELOAD="$SWAGENT_LIB")
    SW_AGENT_NAME=e2e-mariadb-cli "${pre[@]}" mariadb --no-defaults -h 127.0.0.1 -P "$DB_PORT" \
        -u app -papppw --force <"$T/cli.sql" >"$T/$p.cli-tcp.txt" 2>&1
    SW_AGENT_NAME=e2e-mariadb-cli "${pre[@]}" mariadb --no-defaults -S "$DB_SOCK" -u app \
        -papppw --force <"$T/cli.sql" >"$T/$p.cli-sock.txt" 2>&1
    SW_AGENT_NAME=e2e-mariadb-cli "${pre[@]}" mariadb --no-defaults -S "$DB_SOCK" -u app \
        -papppw --max-allowed-packet=64M shop <"$T/big.sql" >"$T/$p.cli-big.txt" 2>&1
    SW_AGENT_NAME=e2e-pymysql "${pre[@]}" $PY3 "$T/client.py" "$DB_PORT" "$DB_SOCK" \
        >"$T/$p.pymysql.txt" 2>&1
    SW_AGENT_NAME=e2e-pdo "${pre[@]}" php "$T/pdo.php" >"$T/$p.pdo.txt" 2>&1
}

run_clients bare
T_START=$(now_ms)
C0=$(count_db_commands)
run_clients traced traced
C1=$(count_db_commands)
for f in cli-tcp cli-sock cli-big pymysql pdo; do
    cmp -s "$T/bare.$f.txt" "$T/traced.$f.txt" ||
        fail "$f: output under the agent differs: $(diff "$T/bare.$f.txt" "$T/traced.$f.txt" | head -5)"
done
# The outputs are what the statements mean (not two equally broken runs).
grep -q '^3	plum	1.25$' "$T/bare.cli-tcp.txt" || fail "mariadb client output: $(head -5 "$T/bare.cli-tcp.txt")"
grep -q "ERROR 1146 (42S02)" "$T/bare.cli-sock.txt" || fail "mariadb client error missing"
grep -q '^1048576$' "$T/bare.cli-big.txt" || fail "1 MiB statement: $(head -c 200 "$T/bare.cli-big.txt")"
grep -q '^17825792 True$' "$T/bare.pymysql.txt" || fail "pymysql 17 MiB value: $(head -5 "$T/bare.pymysql.txt")"
grep -q '^error 1054$' "$T/bare.pymysql.txt" || fail "pymysql error missing"
grep -q '^\[\["apple","0.50"\],\["plum","1.25"\]\]$' "$T/bare.pdo.txt" ||
    fail "PDO output: $(head -5 "$T/bare.pdo.txt")"
grep -q '^error 42S02$' "$T/bare.pdo.txt" || fail "PDO error missing"
kill -0 "$DB_PID" 2>/dev/null || fail "mariadbd (traced) died"

# Spans: every command of the traced clients that the server logged (Query, Prepare, Execute,
# Init DB) is one Exit span (each its own segment: the clients serve no request), plus the two
# prepares that fail (PDO's on missing_table, once per DSN: the server does not log those), and
# no other span exists (the server, traced too, makes none).
N=$((C1 - C0 + 2))
[ "$N" -ge 40 ] || fail "only $N commands in the general log"
wait_segments "$N" 30
T_END=$(now_ms)
check "length == $N" "one segment per command ($N)"
check "$JQDEFS"' all($s[]; root0 and (.spans | length) == 1) and all($s[].spans[]; sane_times
    and .spanType == "Exit" and .spanLayer == "Database" and .componentId == 5
    and tag("db.type") == "Mysql" and (.operationName | startswith("Mysql/")))' "span shape"
check "$JQDEFS"' [$s[].service] | unique == ["e2e-mariadb-cli", "e2e-pdo", "e2e-pymysql"]' "services"
# Peers: the TCP address or the socket path.
check "$JQDEFS"' ([$s[].spans[].peer] | unique) == (["127.0.0.1:'"$DB_PORT"'", "unix:'"$DB_SOCK"'"] | sort)' "peers"
# The mariadb client: `use shop` (InitDB), the query with db.instance from then on, the error.
check "$JQDEFS"' [seg("e2e-mariadb-cli")[].spans[] | select(.operationName == "Mysql/InitDB")]
    | length == 2 and all(.[]; tag("db.instance") == "shop" and .isError == false)' "InitDB spans"
check "$JQDEFS"' [seg("e2e-mariadb-cli")[].spans[]
    | select(tag("db.statement") == "SELECT id, name, price FROM items ORDER BY id")]
    | length == 2 and all(.[]; tag("db.instance") == "shop" and .isError == false)' "query spans"
check "$JQDEFS"' [seg("e2e-mariadb-cli")[].spans[]
    | select(tag("db.statement") == "SELECT * FROM missing_table")] | length == 2
    and all(.[]; .isError and (.logs[0].data | map(select(.key == "error.kind"))[0].value)
        == "MySQL 1146 (42S02)")' "error spans"
# The 1 MiB statement: cut to 2048 bytes and "...".
check "$JQDEFS"' [$s[].spans[] | tag("db.statement") | strings | select(startswith("SELECT LENGTH('"'"'xxx"))]
    | length == 1 and (.[0] | length == 2051 and endswith("xxx..."))' "1 MiB statement cut"
# PyMySQL: its statements (interpolated by the client), the 17 MiB one cut, its error.
check "$JQDEFS"' [seg("e2e-pymysql")[].spans[] | tag("db.statement") | strings] as $q
    | ($q | map(select(. == "SELECT name FROM items WHERE id = 2")) | length) == 2
    and ($q | map(select(startswith("INSERT INTO t VALUES (3, '"'"'") and length == 2051)) | length) == 2
    and ($q | map(select(. == "SELECT nope FROM items")) | length) == 2' "pymysql statements"
# PDO: prepared statements, their executions named by the statement's text.
check "$JQDEFS"' [seg("e2e-pdo")[].spans[]] as $p
    | ($p | map(select(.operationName == "Mysql/Prepare"
        and tag("db.statement") == "SELECT name, price FROM items WHERE id = ? OR name = ?")) | length) == 2
    and ($p | map(select(.operationName == "Mysql/Execute"
        and tag("db.statement") == "SELECT name, price FROM items WHERE id = ? OR name = ?"
        and tag("db.instance") == "shop" and .isError == false)) | length) == 4
    and ($p | map(select(.operationName == "Mysql/Prepare" and .isError
        and tag("db.statement") == "SELECT * FROM missing_table")) | length) == 2' "PDO prepared statements"
echo "ok mariadb (outputs identical under the agent; $N commands, $N spans)"
