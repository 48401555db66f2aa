#!/usr/bin/env bash
# scripts/oap.sh - a real Apache SkyWalking OAP server 10.1.0 on loopback, from Maven Central.
#
#   scripts/oap.sh fetch            download (once) and verify the OAP's jars; prints the cache
#                                   (exit 3: Maven Central unreachable or without them)
#   scripts/oap.sh start [opts]     start the OAP in the background (fetching first if needed)
#   scripts/oap.sh wait [opts]      wait until its GraphQL API answers (bounded)
#   scripts/oap.sh status [opts]    pid, ports, version, RSS; exit 0 only if it answers
#   scripts/oap.sh stop [opts]      stop it by its pid (TERM, then KILL after 20 s)
#
# Options (each also an environment variable):
#   --dir DIR          SWAGENT_OAP_DIR        state: config, logs, pid (default
#                                             ${XDG_STATE_HOME:-~/.local/state}/swagent/oap)
#   --grpc-port N      SWAGENT_OAP_GRPC_PORT  the agents' gRPC port (default 11800)
#   --http-port N      SWAGENT_OAP_HTTP_PORT  HTTP: GraphQL at /graphql (default 12800)
#   --timeout S        SWAGENT_OAP_TIMEOUT    bound of `wait` (default 240)
#   --set KEY=VALUE    an OAP setting of scripts/oap/config/application.yml's ${KEY:default}
#                      (repeatable; not the *_HOST ones: every listener is on 127.0.0.1)
#   SWAGENT_OAP_CACHE      download cache (default ${XDG_CACHE_HOME:-~/.cache}/swagent/oap)
#   SWAGENT_OAP_JAVA_OPTS  JVM options (default -Xms256m -Xmx1g -XX:+UseSerialGC)
#
# What runs (docs/oap.md): the jars of org.apache.skywalking:server-starter:10.1.0 and their
# dependencies at the versions the 10.1.0 build pins (scripts/oap/pom.xml imports
# oap-server-bom), resolved by Maven with strict checksums (each jar against the .sha1 Maven
# Central publishes next to it), then checked against the sha256 list kept in the repo
# (scripts/oap/oap-libs.sha256). Maven Central has no apache-skywalking-apm binary
# distribution tar.gz and no UI (apm-webapp, booster-ui) for 10.1.0, and no configuration
# files (the server-starter jar leaves them out), so this is the OAP only, with a minimal
# configuration of our own (scripts/oap/config/): the modules that store and query a trace
# agent's segments and nothing else, storage H2 in memory, every listener on 127.0.0.1.
# Its environment is only what this script sets (env -i), so SW_* variables of the caller's
# shell do not leak into it.
set -euo pipefail
SCRIPTS=$(cd "$(dirname "$0")" && pwd)
VERSION=10.1.0
OAP_SRC=$SCRIPTS/oap

die() { echo "oap.sh: $*" >&2; exit 1; }

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
}

CMD=${1:-}
[ -n "$CMD" ] || usage
shift
DIR=${SWAGENT_OAP_DIR:-${XDG_STATE_HOME:-$HOME/.local/state}/swagent/oap}
CACHE=${SWAGENT_OAP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/swagent/oap}
GRPC_PORT=${SWAGENT_OAP_GRPC_PORT:-11800}
HTTP_PORT=${SWAGENT_OAP_HTTP_PORT:-12800}
TIMEOUT=${SWAGENT_OAP_TIMEOUT:-240}
JAVA_OPTS=${SWAGENT_OAP_JAVA_OPTS:--Xms256m -Xmx1g -XX:+UseSerialGC}
EXTRA=()
while [ $# -gt 0 ]; do
    case $1 in
    --dir | --grpc-port | --http-port | --timeout | --set)
        [ $# -ge 2 ] || die "$1 needs a value (scripts/oap.sh --help)" ;;
    esac
    case $1 in
    --dir) DIR=$2; shift 2 ;;
    --grpc-port) GRPC_PORT=$2; shift 2 ;;
    --http-port) HTTP_PORT=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --set)
        [[ $2 =~ ^[A-Z][A-Z0-9_]*=.*$ ]] || die "--set wants KEY=VALUE, got '$2'"
        # Every listener stays on loopback.
        [[ ! $2 =~ ^[A-Z0-9_]*_HOST= ]] || die "--set ${2%%=*}: the OAP listens on 127.0.0.1 only"
        EXTRA+=("$2"); shift 2 ;;
    -h | --help) usage ;;
    *) die "unknown option '$1' (scripts/oap.sh --help)" ;;
    esac
done
for p in "$GRPC_PORT" "$HTTP_PORT" "$TIMEOUT"; do
    [[ $p =~ ^[0-9]+$ ]] && [ "$p" -gt 0 ] && [ "$p" -lt 65536 ] || die "bad port/timeout '$p'"
done
LIBS=$CACHE/$VERSION
PIDFILE=$DIR/oap.pid
LOG=$DIR/logs/skywalking-oap-server.log
OUT=$DIR/logs/oap.out

# The ports of a running OAP are those it was started with (kept beside its pid).
[ "$CMD" = start ] || [ ! -f "$DIR/oap.ports" ] || . "$DIR/oap.ports"

# fetch: the jars into $LIBS/m2 (a Maven local repository of their own) and the classpath
# into $LIBS/classpath.txt; $LIBS/verified marks a set that matched the sha256 list.
fetch() {
    local pins=$OAP_SRC/oap-libs.sha256 stamp
    stamp=$(sha256sum "$pins" "$OAP_SRC/pom.xml" | sha256sum | cut -c1-64)
    if [ -f "$LIBS/verified" ] && [ "$(cat "$LIBS/verified")" = "$stamp" ] &&
        [ -s "$LIBS/classpath.txt" ]; then
        return 0
    fi
    # One download at a time per cache (a test and the demo may start together).
    mkdir -p "$CACHE"
    exec 9>"$CACHE/.lock"
    flock -w 900 9 || die "the cache $CACHE stayed locked for 900 s"
    if [ -f "$LIBS/verified" ] && [ "$(cat "$LIBS/verified")" = "$stamp" ] &&
        [ -s "$LIBS/classpath.txt" ]; then
        exec 9>&-
        return 0
    fi
    command -v mvn >/dev/null || die "mvn not found (scripts/deps.sh installs maven)"
    command -v java >/dev/null || die "java not found (scripts/deps.sh installs default-jre-headless)"
    mkdir -p "$LIBS"
    rm -f "$LIBS/verified"
    echo "oap.sh: fetching SkyWalking OAP $VERSION jars from Maven Central into $LIBS" >&2
    local t0=$SECONDS
    # -C: a jar whose .sha1 does not match fails the download.
    if ! mvn -B -q -C -f "$OAP_SRC/pom.xml" -Dmaven.repo.local="$LIBS/m2" \
        dependency:build-classpath -Dmdep.outputFile="$LIBS/classpath.txt" \
        >"$LIBS/mvn.log" 2>&1; then
        tail -n 30 "$LIBS/mvn.log" >&2
        echo "oap.sh: could not get the OAP's jars from Maven Central (log: $LIBS/mvn.log)" >&2
        exit 3
    fi
    # The same set of jars, byte for byte, as when the list was made.
    (cd "$LIBS/m2" && tr ':' '\n' <"$LIBS/classpath.txt" | sed "s|^$LIBS/m2/||" | LC_ALL=C sort |
        xargs sha256sum) >"$LIBS/have.sha256"
    if ! diff -u "$pins" "$LIBS/have.sha256" >"$LIBS/pins.diff"; then
        head -n 20 "$LIBS/pins.diff" >&2
        die "the jars Maven resolved differ from $pins (diff: $LIBS/pins.diff); to download them again: rm -rf $LIBS"
    fi
    echo "$stamp" >"$LIBS/verified"
    exec 9>&-
    echo "oap.sh: $(wc -l <"$pins") jars verified in $((SECONDS - t0)) s" >&2
}

pid_alive() {
    [ -f "$PIDFILE" ] || return 1
    local pid
    pid=$(cat "$PIDFILE")
    # The pid is ours only while it is still the OAP (a recycled pid is someone else's).
    [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q OAPServerStartUp
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

graphql() { # QUERY: the JSON answer of the OAP's GraphQL endpoint
    curl -sS -m 5 -X POST -H 'Content-Type: application/json' \
        --data "$(jq -cn --arg q "$1" '{query: $q}')" "http://127.0.0.1:$HTTP_PORT/graphql"
}

start() {
    if pid_alive; then
        die "an OAP is already running from $DIR (pid $(cat "$PIDFILE")); scripts/oap.sh stop --dir $DIR"
    fi
    local p
    for p in "$GRPC_PORT" "$HTTP_PORT"; do
        ! port_busy "$p" || die "127.0.0.1:$p is in use (pick others: --grpc-port, --http-port)"
    done
    fetch
    rm -rf "$DIR/config"
    mkdir -p "$DIR/logs"
    cp -r "$OAP_SRC/config" "$DIR/config"
    local java
    java=$(command -v java) || die "java not found (scripts/deps.sh installs default-jre-headless)"
    # The listeners' hosts are 127.0.0.1 in config/application.yml; their ports come from here.
    local env=(
        PATH=/usr/bin:/bin HOME="$HOME" LANG=C.UTF-8 ${TZ:+TZ="$TZ"}
        SW_CORE_REST_PORT="$HTTP_PORT" SW_CORE_GRPC_PORT="$GRPC_PORT"
    )
    [ ${#EXTRA[@]} -eq 0 ] || env+=("${EXTRA[@]}")
    {
        echo "GRPC_PORT=$GRPC_PORT"
        echo "HTTP_PORT=$HTTP_PORT"
    } >"$DIR/oap.ports"
    : >"$OUT"
    # The classpath (263 jars) in an argument file keeps `ps` readable.
    printf -- '-cp %s:%s\n' "$DIR/config" "$(cat "$LIBS/classpath.txt")" >"$DIR/classpath.args"
    # shellcheck disable=SC2086 # JAVA_OPTS is a list of options
    env -i "${env[@]}" "$java" $JAVA_OPTS -Doap.logDir="$DIR/logs" \
        -Dcom.linecorp.armeria.warnNettyVersions=false @"$DIR/classpath.args" \
        org.apache.skywalking.oap.server.starter.OAPServerStartUp >"$OUT" 2>&1 </dev/null &
    echo $! >"$PIDFILE"
    date +%s%3N >"$DIR/oap.started"
    echo "oap.sh: OAP $VERSION starting (pid $!): gRPC 127.0.0.1:$GRPC_PORT," \
        "GraphQL http://127.0.0.1:$HTTP_PORT/graphql, log $LOG" >&2
}

log_tail() {
    local f
    for f in "$LOG" "$OUT"; do
        echo "--- $f (last 30 lines)" >&2
        if [ -s "$f" ]; then tail -n 30 "$f" >&2; else echo "(nothing logged yet)" >&2; fi
    done
}

wait_ready() {
    local deadline=$((SECONDS + TIMEOUT)) v
    [ -f "$PIDFILE" ] || die "no OAP started from $DIR (scripts/oap.sh start)"
    while :; do
        if ! pid_alive; then
            log_tail
            die "the OAP (pid $(cat "$PIDFILE")) exited before it answered on 127.0.0.1:$HTTP_PORT"
        fi
        v=$(graphql '{ version }' 2>/dev/null | jq -r '.data.version // empty' 2>/dev/null) || v=""
        if [ -n "$v" ] && port_busy "$GRPC_PORT"; then
            local ms=""
            [ -f "$DIR/oap.started" ] && ms=" after $(($(date +%s%3N) - $(cat "$DIR/oap.started"))) ms"
            echo "oap.sh: OAP $v ready$ms: gRPC 127.0.0.1:$GRPC_PORT, GraphQL http://127.0.0.1:$HTTP_PORT/graphql" >&2
            return 0
        fi
        if [ $SECONDS -ge $deadline ]; then
            log_tail
            die "the OAP (pid $(cat "$PIDFILE")) did not answer GraphQL on 127.0.0.1:$HTTP_PORT within $TIMEOUT s"
        fi
        sleep 1
    done
}

status() {
    if ! pid_alive; then
        echo "oap.sh: no OAP running from $DIR"
        return 1
    fi
    local pid v rss
    pid=$(cat "$PIDFILE")
    rss=$(awk '/^VmRSS/ {print $2 " " $3}' "/proc/$pid/status")
    v=$(graphql '{ version }' 2>/dev/null | jq -r '.data.version // empty' 2>/dev/null) || v=""
    echo "pid=$pid grpc=127.0.0.1:$GRPC_PORT http=127.0.0.1:$HTTP_PORT rss=\"$rss\" version=${v:-not-answering}"
    echo "log=$LOG"
    [ -n "$v" ]
}

stop() {
    if ! pid_alive; then
        rm -f "$PIDFILE"
        echo "oap.sh: no OAP running from $DIR" >&2
        return 0
    fi
    local pid i
    pid=$(cat "$PIDFILE")
    kill "$pid" 2>/dev/null || true
    for i in $(seq 200); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "oap.sh: pid $pid still running after 20 s, killing it" >&2
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$PIDFILE"
    echo "oap.sh: OAP (pid $pid) stopped" >&2
}

case $CMD in
fetch) fetch; echo "$LIBS" ;;
start) start ;;
wait) wait_ready ;;
status) status ;;
stop) stop ;;
*) usage ;;
esac
