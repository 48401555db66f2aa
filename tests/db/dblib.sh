# dblib.sh - real database and cache servers for the tests of tests/db/ (sourced after
# tests/e2e/lib.sh, whose temp dir $T, PIDS and EXIT trap they use). Every server listens on a
# free loopback port and a Unix socket in $T, runs untraced, and is stopped by PID at exit.
# A server missing from this machine fails the test (scripts/deps.sh installs them all).

# need PROGRAM...: fails unless every program is there.
need() {
    local p
    for p in "$@"; do
        command -v "$p" >/dev/null 2>&1 || [ -x "$p" ] || fail "$p is not installed (scripts/deps.sh)"
    done
}

# wait_port PORT SECONDS: until something accepts on 127.0.0.1:PORT.
wait_port() {
    wait_for "python3 -c 'import socket,sys; s=socket.create_connection((\"127.0.0.1\", $1), 1)' 2>/dev/null" "$2"
}

# start_redis: redis-server on 127.0.0.1:$RP and $T/redis.sock, no persistence.
start_redis() {
    need redis-server redis-cli
    RP=$(free_port)
    RSOCK=$T/redis.sock
    redis-server --port "$RP" --bind 127.0.0.1 --unixsocket "$RSOCK" --unixsocketperm 700 \
        --save "" --appendonly no --dir "$T" --daemonize no --protected-mode no \
        >"$T/redis.out" 2>&1 &
    REDIS_PID=$!
    PIDS="$PIDS $REDIS_PID"
    wait_port "$RP" 10 || fail "redis-server did not start"
}

# start_memcached: memcached on 127.0.0.1:$MP (text protocol), and on $T/mc.sock as MCSOCK
# (a second server: memcached listens on either TCP or one socket).
start_memcached() {
    need memcached
    MP=$(free_port)
    memcached -l 127.0.0.1 -p "$MP" -U 0 -u nobody -m 16 >"$T/memcached.out" 2>&1 &
    PIDS="$PIDS $!"
    wait_port "$MP" 10 || fail "memcached did not start"
}

PG_BIN=/usr/lib/postgresql/15/bin
# pg_as CMD...: CMD as the postgres user (the server refuses to run as root), exec'ed (the pid
# of a background pg_as is the program's own).
pg_as() {
    if [ "$(id -u)" = 0 ]; then
        setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
    else
        "$@"
    fi
}

# start_pg: PostgreSQL 15 initialised in $T/pg (owned by postgres when run as root), on
# 127.0.0.1:$PGP and the socket directory $T/pg (PGSOCK), trust authentication, user postgres.
start_pg() {
    need "$PG_BIN/initdb" "$PG_BIN/postgres" psql
    PGP=$(free_port)
    PGSOCK=$T/pg
    mkdir -p "$T/pg"
    [ "$(id -u)" = 0 ] && chown postgres: "$T/pg"
    pg_as "$PG_BIN/initdb" -D "$T/pg/data" -A trust -U postgres --no-sync >"$T/initdb.out" 2>&1 ||
        fail "initdb failed: $(tail -n 5 "$T/initdb.out")"
    pg_as "$PG_BIN/postgres" -D "$T/pg/data" -p "$PGP" -h 127.0.0.1 -k "$T/pg" -c fsync=off \
        -c synchronous_commit=off -c full_page_writes=off >"$T/postgres.out" 2>&1 &
    PIDS="$PIDS $!"
    wait_for "psql -h 127.0.0.1 -p $PGP -U postgres -d postgres -Atc 'select 1' >/dev/null 2>&1" 20 ||
        fail "postgres did not start: $(tail -n 5 "$T/postgres.out")"
}

# spans_of COMPONENT: jq filter for the spans of that component in all segments ($s).
DBDEFS='
def dbspans(c): [$s[].spans[] | select(.componentId == c)];
'
