# lemp_lib.sh - MariaDB, PHP-FPM and nginx-with-fastcgi_pass for the end-to-end tests of issue 36
# (sourced after lib.sh by tests/e2e/mariadb.sh and tests/e2e/lemp.sh; bash).
#
# Rules as lib.sh: everything in $T, loopback ports from free_port, Unix sockets in $T, every
# process recorded in PIDS and stopped by PID in the EXIT trap, every wait bounded. The servers
# come from Debian's packages (scripts/deps.sh): mariadb-server, mariadb-client, php-fpm,
# php-mysql, php-cli, python3-pymysql.

# need_lemp_tools TOOL...: fails (not skips: CI installs them) when one is missing.
need_lemp_tools() {
    local t
    for t in "$@"; do
        command -v "$t" >/dev/null 2>&1 || [ -x "/usr/sbin/$t" ] ||
            { echo "FAIL ($E2E_NAME): $t not installed (scripts/deps.sh installs it)" >&2; exit 1; }
    done
}

# start_mariadb [PRELOAD]: a MariaDB server of its own: datadir $T/db made by mariadb-install-db,
# listening on $T/db.sock and 127.0.0.1:$DB_PORT; database `shop` with a table `items` and a
# user app/apppw (TCP and socket). As root, both run with --user=root (mariadbd refuses root
# otherwise): the datadir is the test's own, so no system account is needed. The general query
# log ($T/db/general.txt) lists every command the server got (count_db_commands). PRELOAD=traced runs
# the server itself under the agent (service e2e-mariadbd). Sets DB_PORT, DB_SOCK, DB_PID.
start_mariadb() {
    local me
    me=$(id -un)
    DB_PORT=$(free_port)
    DB_SOCK=$T/db.sock
    mkdir -p "$T/db"
    mariadb-install-db --no-defaults --user="$me" --datadir="$T/db" --skip-test-db \
        --auth-root-authentication-method=normal >"$T/db-install.log" 2>&1 ||
        fail "mariadb-install-db failed"
    local pre=()
    # Not in the sanitizer stage (ASAN_OPTIONS set, scripts/test.sh stage 2): there mariadbd
    # dies in the ASan runtime's own start-up (a SEGV before its first thread is registered)
    # when the runtime comes in after libc with the agent, with or without anything traced.
    [ "${1:-}" = traced ] && [ -z "${ASAN_OPTIONS:-}" ] &&
        pre=(env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=e2e-mariadbd)
    "${pre[@]}" /usr/sbin/mariadbd --no-defaults --user="$me" --datadir="$T/db" \
        --socket="$DB_SOCK" --port="$DB_PORT" --bind-address=127.0.0.1 --skip-name-resolve \
        --pid-file="$T/db.pid" --log-error="$T/db.err" --innodb-buffer-pool-size=16M \
        --skip-log-bin --log-ddl-recovery="$T/db/ddl-recovery.bin" --general-log=1 \
        --general-log-file="$T/db/general.txt" --max-allowed-packet=64M >/dev/null 2>&1 &
    DB_PID=$!
    PIDS="$PIDS $DB_PID"
    wait_for "mariadb-admin --no-defaults -S '$DB_SOCK' -u root ping >/dev/null 2>&1" 30 ||
        fail "mariadbd did not start"
    mariadb --no-defaults -S "$DB_SOCK" -u root <<'SQL' || fail "MariaDB setup failed"
CREATE DATABASE shop;
CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(64), price DECIMAL(8,2));
INSERT INTO shop.items VALUES (1, 'apple', 0.50), (2, 'pear', 0.75), (3, 'plum', 1.25);
CREATE USER 'app'@'127.0.0.1' IDENTIFIED BY 'apppw';
CREATE USER 'app'@'localhost' IDENTIFIED BY 'apppw';
GRANT ALL ON shop.* TO 'app'@'127.0.0.1';
GRANT ALL ON shop.* TO 'app'@'localhost';
SQL
}

# start_php_fpm [PRELOAD]: PHP-FPM with two pools: `sock` on $FPM_SOCK (mode 0666, so nginx's
# workers, nobody when nginx starts as root, can connect) and `tcp` on 127.0.0.1:$FPM_PORT;
# two static workers each, the environment kept (clear_env = no: the agent's variables reach
# the workers). As root it needs -R and a pool user (root: the test's files are root's).
# PRELOAD=traced runs it under the agent (service e2e-php). Sets FPM_SOCK, FPM_PORT, FPM_PID.
start_php_fpm() {
    FPM_SOCK=$T/fpm.sock
    FPM_PORT=$(free_port)
    local me userline="" rflag=()
    me=$(id -un)
    if [ "$(id -u)" = 0 ]; then
        userline="user = root"
        rflag=(-R)
    fi
    cat >"$T/fpm.conf" <<CONF
[global]
pid = $T/fpm.pid
error_log = $T/fpm.err
daemonize = no
[sock]
$userline
listen = $FPM_SOCK
listen.mode = 0666
pm = static
pm.max_children = 2
clear_env = no
catch_workers_output = yes
[tcp]
$userline
listen = 127.0.0.1:$FPM_PORT
pm = static
pm.max_children = 2
clear_env = no
catch_workers_output = yes
CONF
    local pre=()
    [ "${1:-}" = traced ] && pre=(env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=e2e-php)
    "${pre[@]}" /usr/sbin/php-fpm8.2 --nodaemonize --fpm-config "$T/fpm.conf" "${rflag[@]}" \
        >"$T/fpm.out" 2>&1 &
    FPM_PID=$!
    PIDS="$PIDS $FPM_PID"
    wait_for "[ -S '$FPM_SOCK' ] && (exec 3<>/dev/tcp/127.0.0.1/$FPM_PORT) 2>/dev/null" 15 ||
        fail "php-fpm did not start"
}

# lemp_www: $T/www/items.php (PDO to MariaDB over the Unix socket: a query and a real
# server-side prepared statement, ATTR_EMULATE_PREPARES off; ?id= picks the item; then php-redis
# to the redis-server of start_redis (tests/db/dblib.sh) on 127.0.0.1:$RP: SET item:<id> to the
# name and GET it back; ?fail=1 then runs a statement on a missing table) and $T/www/hello.php
# (no database).
lemp_www() {
    mkdir -p "$T/www"
    cat >"$T/www/items.php" <<PHP
<?php
\$db = new PDO('mysql:unix_socket=$DB_SOCK;dbname=shop', 'app', 'apppw',
    [PDO::ATTR_EMULATE_PREPARES => false, PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]);
\$n = \$db->query('SELECT COUNT(*) FROM items')->fetchColumn();
\$st = \$db->prepare('SELECT name, price FROM items WHERE id = ?');
\$id = (int)(\$_GET['id'] ?? 1);
\$st->execute([\$id]);
\$row = \$st->fetch(PDO::FETCH_ASSOC);
\$r = new Redis();
\$r->connect('127.0.0.1', $RP);
\$r->set("item:\$id", \$row['name']);
echo "cached=", \$r->get("item:\$id"), "\n";
\$r->close();
if (isset(\$_GET['fail'])) {
    try { \$db->query('SELECT * FROM missing_table'); } catch (PDOException \$e) {
        http_response_code(500); echo "error: ", \$e->getCode(), "\n"; }
}
echo "items=\$n name=", \$row['name'], " price=", \$row['price'], "\n";
PHP
    cat >"$T/www/hello.php" <<'PHP'
<?php
header('X-Hello: yes');
if (isset($_GET['missing'])) { http_response_code(404); echo "no such thing\n"; exit; }
echo "hello ", $_SERVER['REQUEST_METHOD'], " ", strlen(file_get_contents('php://input')), "\n";
PHP
}

# start_lemp_nginx [PRELOAD]: nginx on 127.0.0.1:$NG serving $T/www, *.php through fastcgi_pass
# to PHP-FPM's Unix socket (a connection per request), and location /tcp/ to its TCP pool over
# kept-alive FastCGI connections (fastcgi_keep_conn: several requests on one connection).
# PRELOAD=traced: service e2e-nginx.
start_lemp_nginx() {
    NG=$(free_port)
    nginx_conf "    upstream fpm_tcp {
        server 127.0.0.1:$FPM_PORT;
        keepalive 2;
    }
    server {
        listen 127.0.0.1:$NG;
        root $T/www;
        location ~ ^/tcp(/.+\\.php)\$ {
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME $T/www\$1;
            fastcgi_param SCRIPT_NAME \$1;
            fastcgi_keep_conn on;
            fastcgi_pass fpm_tcp;
        }
        location ~ \\.php\$ {
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME \$document_root\$fastcgi_script_name;
            fastcgi_pass unix:$FPM_SOCK;
        }
    }" "worker_processes 1;"
    local pre=()
    [ "${1:-}" = traced ] && pre=(env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME=e2e-nginx)
    "${pre[@]}" nginx -c "$T/ngx/nginx.conf" -p "$T/ngx" -g 'daemon off;' >"$T/nginx.out" 2>&1 &
    PIDS="$PIDS $!"
    wait_for "(exec 3<>/dev/tcp/127.0.0.1/$NG) 2>/dev/null" 10 || fail "nginx did not start"
}

# count_db_commands: the commands of the general query log that make a span (Query, Prepare,
# Execute, Init DB; a statement's continuation lines start with no thread id and do not count).
count_db_commands() {
    grep -aEc '^([0-9]{6} [0-9:. ]+)?[[:space:]]+[0-9]+ (Query|Prepare|Execute|Init DB)([[:space:]]|$)' \
        "$T/db/general.txt"
}
