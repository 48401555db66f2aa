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
mariadb --no-defaults -S "$DB_SOCK" -u root -e "SET GLOBAL max_allowed_packet = 67108864" ||
    fail "max_allowed_packet"

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

T_START=$(now_ms)
run_clients bare
run_clients traced traced
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
echo "ok mariadb (outputs identical under the agent)"
