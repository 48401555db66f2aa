# shellcheck shell=bash
# bench/common.sh - shell helpers of bench/run.sh and bench/insitu.sh (sourced, not run).
# BENCH_TAG: the prefix of their messages.

free_port() { # -> a free TCP port on 127.0.0.1
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
cpu_ns() { # PID... -> time on a CPU of all their threads, in ns (/proc/PID/task/*/schedstat:
    # exact, where utime+stime come in 10 ms ticks: +-1 tick is +-6 % of a one-second run)
    local p
    for p in "$@"; do cat /proc/"$p"/task/*/schedstat 2>/dev/null; done | awk '{s += $1} END {printf "%.0f\n", s}'
}
# rings_dir CLI NAME FALLBACK -> where to put the rings of a bench run: beside the agent's default
# runtime directory without XDG_RUNTIME_DIR, as the agent itself works it out (agent/config.h),
# that is a new /dev/shm/NAME.XXXXXX (memory) on most machines, else FALLBACK (not created). A
# ring file on a disk's filesystem is written back by the kernel every few seconds, after which
# the next write to each of its pages faults (page_mkwrite): at a few hundred requests/s that
# was ~1 µs of the agent's time per request (bench/HISTORY.md), a cost the default avoids.
rings_dir() {
    local def
    def=$(env -u XDG_RUNTIME_DIR -u SW_AGENT_RUNTIME_DIR SW_AGENT_CONFIG=/dev/null \
        "$1" status 2>/dev/null | sed -n 's/^runtime dir: //p' || true)
    case $def in
    /dev/shm/*) mktemp -d "/dev/shm/$2.XXXXXX" ;;
    *) echo "$3" ;;
    esac
}
wait_file() { # FILE -> waits until it is non-empty (10 s)
    for _ in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.1; done
    echo "$BENCH_TAG: $1 did not appear" >&2
    return 1
}
# cg_stub_agent SERVICE: collector-stub ($STUB) on a free port writing $T/seg.json (its pid added
# to PIDS), and the agent's configuration $T/agent.config for it (service SERVICE, every trace
# sampled, runtime dir $T/run, the reporter of build $B) exported as SW_AGENT_CONFIG.
cg_stub_agent() {
    "$STUB" --listen 127.0.0.1:0 --port-file "$T/stub.port" --segments "$T/seg.json" \
        --management "$T/mgmt.json" 2>"$T/stub.err" &
    PIDS="$PIDS $!"
    wait_file "$T/stub.port" || return 1
    mkdir -m 700 "$T/run"
    cat >"$T/agent.config" <<CONF
agent.service_name=$1
collector.backend_service=127.0.0.1:$(cat "$T/stub.port")
agent.sample_n_per_3_secs=-1
swagent.runtime_dir=$T/run
swagent.reporter_path=$B/agent/swagent-reporter
swagent.reporter_idle_exit=3
CONF
    export SW_AGENT_CONFIG=$T/agent.config
}
wait_port() { # PORT -> waits until 127.0.0.1:PORT accepts (10 s)
    for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done
    echo "$BENCH_TAG: port $1 not listening" >&2
    return 1
}
# nginx_conf DIR PORT WORKER_CONNECTIONS KEEPALIVE_REQUESTS SINGLE LOCATION [HTTP_EXTRA]
# -> DIR/nginx.conf: one worker serving LOCATION on 127.0.0.1:PORT (keep-alive, sendfile, no
# access log), its pid, log and temp files in DIR, as root's user when run by root.
# SINGLE=1: one process in the foreground (master_process off; daemon off); else the caller
# gives -g 'daemon off;'. HTTP_EXTRA: more lines in the http block (an upstream).
nginx_conf() {
    local d=$1 port=$2 wc=$3 kr=$4 single=$5 loc=$6 extra=${7:-} head="" user=""
    [ "$single" = 1 ] && head="master_process off;
daemon off;"
    [ "$(id -u)" -eq 0 ] && user="user root;"
    cat >"$d/nginx.conf" <<CONF
$head
worker_processes 1;
pid $d/nginx.pid;
error_log $d/error.log;
$user
events { worker_connections $wc; }
http {
    access_log off;
    sendfile on;
    keepalive_requests $kr;
    client_body_temp_path $d/body;
    proxy_temp_path $d/proxy;
    fastcgi_temp_path $d/fastcgi;
    uwsgi_temp_path $d/uwsgi;
    scgi_temp_path $d/scgi;
    $extra
    server {
        listen 127.0.0.1:$port;
        $loc
    }
}
CONF
}
# cg_nginx_run OUT N PRELOAD CONFIG DIR WWW -> nginx itself under callgrind (one process:
# master_process off; its files in DIR), N requests for WWW's small.txt on one keep-alive
# connection ($BB/sw_bench_client), stopped with SIGTERM; the callgrind file is OUT. PRELOAD
# and CONFIG (SW_AGENT_CONFIG) may be empty. The nginx's pid goes to PIDS.
cg_nginx_run() {
    local out=$1 n=$2 pre=$3 cfg=$4 d=$5 www=$6 port vp
    port=$(free_port)
    mkdir -p "$d"
    nginx_conf "$d" "$port" 64 1000000 1 "location / { root $www; }"
    env ${cfg:+SW_AGENT_CONFIG=$cfg} ${pre:+LD_PRELOAD=$pre} valgrind --tool=callgrind \
        --trace-children=no --callgrind-out-file="$out" nginx -c "$d/nginx.conf" -p "$d" \
        2>"$d/valgrind.log" &
    vp=$!
    PIDS+=($vp)
    for _ in $(seq 300); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
    "$BB/sw_bench_client" "$port" "$n" /small.txt
    # nginx under valgrind sometimes misses a first SIGTERM: repeat until it has exited.
    for _ in $(seq 120); do
        kill -TERM $vp 2>/dev/null || break
        sleep 0.5
    done
    wait $vp || true
}
# idle_load_start CORE... -> a busy loop under SCHED_IDLE pinned to each CORE, for the pairs
# (pids in IDLE_LOAD_PIDS and PIDS; idle_load_stop ends them). On a VM a core with nothing to
# run halts, and waking a task on a halted core costs a VM exit: ~15 us at the median here,
# against ~4 us on a core that runs SCHED_IDLE work, which a waking task preempts at once. The
# traced side's swagent-reporter and collector-stub are such work (SCHED_IDLE, on its core), so
# without a loop on both cores the traced core halted less often than the bare one and its
# wake-ups were the faster: two bare nginx, one with a loop on its core, served ~30 % more
# requests/s saturated and a ~20 % lower p99 paced (bench/HISTORY.md). With a loop on both,
# neither core halts and the pair compares the work, not the idle states. The loop's own CPU
# is what the scheduler gives SCHED_IDLE while anything else runs (weight 3 against 1,024).
idle_load_start() {
    local c
    IDLE_LOAD_PIDS=()
    for c in "$@"; do
        chrt -i 0 taskset -c "$c" sh -c 'while :; do :; done' &
        IDLE_LOAD_PIDS+=($!)
        PIDS+=($!)
    done
}
idle_load_stop() {
    local p
    for p in "${IDLE_LOAD_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${IDLE_LOAD_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    IDLE_LOAD_PIDS=()
}
