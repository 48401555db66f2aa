#!/usr/bin/env bash
# bench/run.sh - swagent's overhead, measured: builds what it needs, runs every comparison
# paired in one run on loopback, and writes bench/report/REPORT.md + bench/report/chart.png.
#
#   bench/run.sh [--quick] [--keep]
#   bench/run.sh --ab-reporter=OTHER_REPORTER [--rounds=N]
#   bench/run.sh --ab-lib=OTHER_LIBSWAGENT [--rounds=N] [--saturated]
#   bench/run.sh --node [--quick] [--keep]
#
#   --quick  ~2-4 minutes (fewer, shorter repetitions; same kinds of figures), written to
#            bench/report/quick/ (the full run's report stays); full: ~10 min
#   --keep   leave the temporary directory (logs, callgrind files, raw data) for inspection
#   --ab-reporter  only the paced pair (1 ms think time, 16 connections), N rounds (default 4)
#            of 4 repetitions with this build's swagent-reporter (B) and OTHER_REPORTER (A)
#            alternated, the same agent and nginx for both; prints the medians of each and
#            writes bench/report/ab-reporter.txt (~50 s a round). How a reporter change is
#            measured: its effect on the application's latency is a few percent, under the
#            noise of two separate runs.
#   --ab-lib  the same for an agent library: the traced nginx runs this build's libswagent.so (B)
#            and OTHER_LIBSWAGENT (A) in alternate rounds (a fresh nginx each round), the same
#            reporter for both; writes bench/report/ab-lib.txt. How an agent change that
#            callgrind cannot see (cache lines, pages) is measured.
#   --ab-b=LIB  with --ab-lib: LIB instead of this build's libswagent.so on the B side (e.g. the
#            empty object against bench's interposition floor: bench/interpose_floor.c)
#   --ab-sample=N  in the A/B modes, the traced side's agent.sample_n_per_3_secs (default: sample
#            all); N=1 measures the untraced path with a reporter that has almost nothing to do
#   --saturated  the A/B modes with the saturated pair (no think time) instead of the paced one,
#            writing ab-NAME-saturated.txt: where most traced requests are shed (the reporter
#            hardly gets the CPU), i.e. an A/B of the untraced path.
#   --node   only the Node.js pairs (bench/node_server.js, Node's own http server with a one-line
#            handler, one process per side): instructions on node's main thread per request
#            (callgrind, bare vs agent), a paced pair (8 connections, 2 ms think time) and a
#            saturated one (8 connections), node's CPU per request on each side; writes
#            NODE.md beside REPORT.md (bench/node_report.py). ~4 min, --quick ~2 min.
#   SW_BENCH_BUILD=DIR  build directory (default build-bench)
#   SW_BENCH_IDLE_LOAD=0  no SCHED_IDLE busy loop on the two cores during the pairs (the method
#            of the runs before AJ; bench/common.sh, idle_load_start, says why there is one)
#
# What is measured (the method of each is written into the report too):
#   1. nginx serving a small file under wrk (keep-alive): bare vs agent sampling everything,
#      bare vs bench/interpose_floor.c (the pair's own floor), bare vs agent with
#      agent.sample_n_per_3_secs=10, and a proxy chain (nginx -> backend nginx, sw8 inserted)
#      bare vs traced. The two sides of a pair are served AT THE SAME TIME
#      by two instances under two wrk processes; each side (its nginx processes + its wrk) is
#      pinned to its own core, the reporter and collector-stub to the traced side's core, and
#      the cores are swapped every repetition.
#   2. CPU time per request of the nginx workers (/proc/<pid>/task/*/schedstat, ns) and of the
#      reporter process (utime+stime), over the same runs.
#   3. Instructions (valgrind callgrind, deterministic) on the application thread of a minimal
#      blocking HTTP server, per traced request, and per syscall on untracked fds; the cache
#      lines and pages of code (callgrind) and of data (lackey) the agent touches per request.
#   4. Start-up time, peak RSS and thread count of /bin/true and of traced servers (the
#      minimal server and nginx: spawn -> first and second response).
#   5. swagent-reporter throughput: segments/s encoded and delivered to collector-stub, the
#      reporter pinned to one core.
# Everything listens on 127.0.0.1; every process started here is stopped by its PID at exit.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
QUICK=0
KEEP=0
AB_REPORTER=""
AB_LIB=""
AB_ROUNDS=4
AB_SAT=0
AB_B=""
AB_SAMPLE=""
NODE=0
for a in "$@"; do
    case $a in
    --quick) QUICK=1 ;;
    --keep) KEEP=1 ;;
    --ab-reporter=*) AB_REPORTER=${a#--ab-reporter=} ;;
    --ab-lib=*) AB_LIB=${a#--ab-lib=} ;;
    --rounds=*) AB_ROUNDS=${a#--rounds=} ;;
    --ab-b=*) AB_B=${a#--ab-b=} ;;
    --ab-sample=*) AB_SAMPLE=${a#--ab-sample=} ;;
    --saturated) AB_SAT=1 ;;
    --node) NODE=1 ;;
    -h | --help)
        sed -n '2,/^set -euo/{/^#/p}' "$0"
        exit 0
        ;;
    *)
        echo "unknown option $a" >&2
        exit 2
        ;;
    esac
done

scripts/deps.sh
for tool in cmake wrk nginx valgrind callgrind_annotate gnuplot python3 taskset chrt; do
    command -v "$tool" >/dev/null || {
        echo "bench: $tool is missing (scripts/deps.sh installs everything)" >&2
        exit 1
    }
done
[ $NODE = 0 ] || command -v node >/dev/null || {
    echo "bench: node is missing (scripts/deps.sh installs nodejs)" >&2
    exit 1
}

if [ $QUICK -eq 1 ]; then
    REPS=2 DUR=4 CG_N1=500 CG_N2=1500 SC_N1=1000 SC_N2=6000 START_RUNS=150 REP_N=50000
    REP_CG_N1=300 REP_CG_N2=900 TLS_N1=200 TLS_N2=600
else
    REPS=5 DUR=6 CG_N1=1000 CG_N2=6000 SC_N1=1000 SC_N2=21000 START_RUNS=600 REP_N=200000
    REP_CG_N1=1000 REP_CG_N2=3000
    # nginx's own count moves by up to ~30,000 instructions between runs (its cached time
    # strings, made again each second of a run under valgrind): over 1,200 requests, ~25 per
    # request at most.
    TLS_N1=300 TLS_N2=1500
fi
CONNS=16
NCPU=$(nproc)
CORE_A=0
CORE_B=$((NCPU > 1 ? 1 : 0))

BUILD=${SW_BENCH_BUILD:-$ROOT/build-bench}
echo "bench: building in $BUILD" >&2
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSW_BUILD_BENCH=ON \
    -DSW_BUILD_TESTS=OFF >/dev/null
cmake --build "$BUILD" -j"$NCPU" --target swagent swagent-reporter collector-stub swagent-cli \
    sw_bench_server sw_bench_client sw_bench_fill sw_bench_startup sw_bench_empty \
    sw_bench_interpose_floor >/dev/null
LIB=$BUILD/agent/libswagent.so
REPORTER=$BUILD/agent/swagent-reporter
STUB=$BUILD/collector-stub/collector-stub
CLI=$BUILD/agent/swagent
BB=$BUILD/bench
OUT=$ROOT/bench/report
# A quick run's report goes beside the full one (bench/report/quick/, not in git): it used to
# overwrite the committed report of the last full run.
if [ $QUICK -eq 1 ] && [ -z "$AB_REPORTER$AB_LIB" ]; then
    OUT=$ROOT/bench/report/quick
fi
mkdir -p "$OUT"

BENCH_TAG=bench
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"
T=$(mktemp -d /tmp/swagent-bench.XXXXXX)
chmod 755 "$T"
RUN=$(rings_dir "$CLI" swagent-bench "$T/run") # where the agent's default would put them
PIDS=()
cleanup() {
    set +e
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for f in "$T"/ng-*/nginx.pid; do kill "$(cat "$f" 2>/dev/null)" 2>/dev/null; done
    sleep 0.3
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    [ "$RUN" != "$T/run" ] && rm -rf "$RUN"
    if [ $KEEP -eq 1 ]; then echo "bench: kept $T" >&2; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "bench: [${SECONDS}s] $*" >&2; }
cpu_ticks() { # PID... -> utime+stime of all, in clock ticks
    local s=0 p
    for p in "$@"; do
        s=$((s + $(awk '{sub(/.*\) /, ""); print $12 + $13}' "/proc/$p/stat")))
    done
    echo $s
}
rss_parts() { # PID -> "anon file shmem" KiB
    awk '/^RssAnon/{a=$2} /^RssFile/{f=$2} /^RssShmem/{s=$2} END{print a, f, s}' "/proc/$1/status"
}
CLK_TCK=$(getconf CLK_TCK)
kv() { # KEY LINE -> value of KEY=value in LINE
    sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$2"
}

# ---- collector-stub + reporter + agent config (the agent's data really leaves the process) --
mkdir -p -m 700 "$RUN" && chmod 700 "$RUN"
# collector-stub stands in for an OAP, which runs on another host: it is charged to the traced
# side's core (pinned there in every pair), under SCHED_IDLE so that its bursts (a batch of 500
# segments parsed at once) do not delay nginx the way a remote OAP could not.
chrt -i 0 "$STUB" --listen 127.0.0.1:0 --port-file "$T/stub.port" --segments /dev/null --discard \
    2>"$T/stub.log" &
STUB_PID=$!
PIDS+=($STUB_PID)
wait_file "$T/stub.port"
COLLECTOR=127.0.0.1:$(cat "$T/stub.port")
write_config() { # FILE [extra lines]
    local f=$1
    shift
    {
        echo "collector.backend_service=$COLLECTOR"
        echo "swagent.runtime_dir=$RUN"
        echo "swagent.reporter_path=$REPORTER"
        echo "agent.service_name=bench"
        echo "logging.dir=$T"
        for l in "$@"; do echo "$l"; done
    } >"$f"
}
write_config "$T/all.config"
write_config "$T/s10.config" "agent.sample_n_per_3_secs=10"
AB_CFG=all
if [ -n "$AB_SAMPLE" ]; then
    AB_CFG=ab
    write_config "$T/ab.config" "agent.sample_n_per_3_secs=$AB_SAMPLE"
fi
# Shed requests (section 3): the smallest ring and no reporter to drain it, so that past its
# first few hundred requests every trace is shed at its start (the ring has no room).
mkdir -p "$T/run-shed"
write_config "$T/shed.config" "swagent.ring_bytes=65536" "swagent.reporter_path=/bin/true" \
    "swagent.runtime_dir=$T/run-shed"
export SW_AGENT_CONFIG=$T/all.config
unset LD_PRELOAD SW_AGENT_DISABLE || true
write_config "$T/nice0.config" "swagent.reporter_nice=0" "swagent.reporter_sched_idle=false"
# start_reporter [CONFIG]: the reporter (default config: SCHED_IDLE and nice 10, the defaults).
start_reporter() {
    SW_AGENT_CONFIG=${1:-$T/all.config} "$REPORTER" --foreground --runtime-dir "$RUN" \
        --collector "$COLLECTOR" 2>>"$T/reporter.log" &
    REP_PID=$!
    PIDS+=($REP_PID)
    sleep 0.3
}
stop_reporter() {
    kill "$REP_PID" 2>/dev/null || true
    wait "$REP_PID" 2>/dev/null || true
}
start_reporter

DATA=$T/data
mkdir -p "$DATA"
mkdir -p "$T/www"
head -c 612 /dev/zero | tr '\0' 'x' >"$T/www/small.txt" # nginx's default index.html size
: >"$DATA/results.txt"
res() { echo "$*" >>"$DATA/results.txt"; } # KEY VALUE

# ---------------------------------------------------------------- 3. instructions (callgrind)
if [ -z "$AB_REPORTER$AB_LIB" ] && [ $NODE = 0 ]; then # sections 3 and 4 (not in the other modes)
log "instructions per request and per untracked syscall (callgrind)"
cg_server() { # TAG N PRELOAD [CONFIG] -> callgrind file $T/cg.TAG.N
    local tag=$1 n=$2 pre=$3 cfg=${4:-$T/all.config}
    rm -f "$T/cg.port"
    env SW_AGENT_CONFIG="$cfg" ${pre:+LD_PRELOAD=$pre} valgrind --tool=callgrind --trace-children=no \
        --dump-instr=yes --callgrind-out-file="$T/cg.$tag.$n" "$BB/sw_bench_server" http "$T/cg.port" "$n" \
        2>"$T/cg.$tag.$n.log" &
    local vp=$!
    wait_file "$T/cg.port"
    "$BB/sw_bench_client" "$(cat "$T/cg.port")" "$n"
    wait $vp
}
cg_sys() { # TAG N PRELOAD
    env ${3:+LD_PRELOAD=$3} valgrind --tool=callgrind --trace-children=no \
        --callgrind-out-file="$T/sc.$1.$2" "$BB/sw_bench_server" syscalls "$2" \
        2>"$T/sc.$1.$2.log"
}
for n in $CG_N1 $CG_N2; do
    cg_server bare "$n" ""
    cg_server agent "$n" "$LIB"
    cg_server unsampled "$n" "$LIB" "$T/s10.config"
    cg_server shed "$n" "$LIB" "$T/shed.config"
done
for n in $SC_N1 $SC_N2; do
    cg_sys bare "$n" ""
    cg_sys agent "$n" "$LIB"
done
DIFF=$ROOT/bench/cg_diff.py
python3 "$DIFF" "$T/cg.bare.$CG_N1" "$T/cg.bare.$CG_N2" $((CG_N2 - CG_N1)) 8 >"$DATA/cg_req_bare.txt"
python3 "$DIFF" "$T/cg.agent.$CG_N1" "$T/cg.agent.$CG_N2" $((CG_N2 - CG_N1)) 60 \
    "$T/cg.bare.$CG_N1" "$T/cg.bare.$CG_N2" $((CG_N2 - CG_N1)) >"$DATA/cg_req_agent.txt"
python3 "$DIFF" "$T/cg.unsampled.$CG_N1" "$T/cg.unsampled.$CG_N2" $((CG_N2 - CG_N1)) 12 \
    "$T/cg.bare.$CG_N1" "$T/cg.bare.$CG_N2" $((CG_N2 - CG_N1)) >"$DATA/cg_req_unsampled.txt"
python3 "$DIFF" "$T/cg.shed.$CG_N1" "$T/cg.shed.$CG_N2" $((CG_N2 - CG_N1)) 14 \
    "$T/cg.bare.$CG_N1" "$T/cg.bare.$CG_N2" $((CG_N2 - CG_N1)) >"$DATA/cg_req_shed.txt"
python3 "$DIFF" "$T/sc.bare.$SC_N1" "$T/sc.bare.$SC_N2" $((3 * (SC_N2 - SC_N1))) 5 \
    >"$DATA/cg_sys_bare.txt"
python3 "$DIFF" "$T/sc.agent.$SC_N1" "$T/sc.agent.$SC_N2" $((3 * (SC_N2 - SC_N1))) 8 \
    "$T/sc.bare.$SC_N1" "$T/sc.bare.$SC_N2" $((3 * (SC_N2 - SC_N1))) >"$DATA/cg_sys_agent.txt"
res ir_req_bare "$(awk '$1=="total"{print $2}' "$DATA/cg_req_bare.txt")"
res ir_req_agent "$(awk '$1=="total"{print $2}' "$DATA/cg_req_agent.txt")"
res ir_req_unsampled "$(awk '$1=="total"{print $2}' "$DATA/cg_req_unsampled.txt")"
res ir_req_shed "$(awk '$1=="total"{print $2}' "$DATA/cg_req_shed.txt")"
res ir_sys_bare "$(awk '$1=="total"{print $2}' "$DATA/cg_sys_bare.txt")"
res ir_sys_agent "$(awk '$1=="total"{print $2}' "$DATA/cg_sys_agent.txt")"
# The agent's code on every request's path: distinct instructions, cache lines and pages.
res footprint "$(python3 "$ROOT/bench/cg_footprint.py" "$T/cg.agent.$CG_N2" "$CG_N2" libswagent)"
# ... and the data its instructions touch per request (valgrind lackey, 300 requests).
rm -f "$T/lk.port"
env SW_AGENT_CONFIG="$T/all.config" LD_PRELOAD="$LIB" valgrind --tool=lackey --trace-mem=yes \
    --log-file="$T/lackey.txt" "$BB/sw_bench_server" http "$T/lk.port" 300 &
LK_PID=$!
wait_file "$T/lk.port"
grep libswagent "/proc/$LK_PID/maps" >"$T/lk.maps"
"$BB/sw_bench_client" "$(cat "$T/lk.port")" 300
wait $LK_PID
res data_footprint "$(python3 "$ROOT/bench/lackey_footprint.py" "$T/lackey.txt" "$T/lk.maps" "$LIB")"
rm -f "$T/lackey.txt"

# nginx itself under callgrind (one process: master_process off), N requests for the 612-byte
# file on one keep-alive connection, stopped with SIGTERM; the same N1/N2 difference.
cg_nginx() { # TAG N PRELOAD
    cg_nginx_run "$T/ng.$1.$2" "$2" "$3" "${SW_AGENT_CONFIG:-}" "$T/cgng-$1-$2" "$T/www"
}
for n in $CG_N1 $CG_N2; do
    cg_nginx bare "$n" ""
    cg_nginx agent "$n" "$LIB"
done
python3 "$DIFF" "$T/ng.bare.$CG_N1" "$T/ng.bare.$CG_N2" $((CG_N2 - CG_N1)) 8 >"$DATA/cg_ng_bare.txt"
python3 "$DIFF" "$T/ng.agent.$CG_N1" "$T/ng.agent.$CG_N2" $((CG_N2 - CG_N1)) 12 \
    "$T/ng.bare.$CG_N1" "$T/ng.bare.$CG_N2" $((CG_N2 - CG_N1)) >"$DATA/cg_ng_agent.txt"
res ir_ng_bare "$(awk '$1=="total"{print $2}' "$DATA/cg_ng_bare.txt")"
res ir_ng_agent "$(awk '$1=="total"{print $2}' "$DATA/cg_ng_agent.txt")"
# The nginx HTTPS pair beside its own plaintext one (bench/tls.sh: TLS server, callgrind).
log "nginx HTTPS vs HTTP, instructions per request (bench/tls.sh)"
: >"$DATA/tls.txt"
OUT=$DATA "$ROOT/bench/tls.sh" --lib="$LIB" --n1="$TLS_N1" --n2="$TLS_N2" >/dev/null 2>"$T/tls.log" ||
    log "bench/tls.sh failed: $(tail -n 3 "$T/tls.log")"
cat "$DATA/tls.txt" >>"$DATA/results.txt"
# The HTTP/2 pairs beside the HTTP/1.x ones (bench/h2.sh: nghttpd under h2load, cleartext and
# TLS, bare and traced at the same time; pair_h2_clear.txt, pair_h2_tls.txt in the pairs table).
log "nghttpd under h2load, HTTP/2 cleartext and TLS: bare vs traced (bench/h2.sh)"
: >"$DATA/h2.txt"
OUT=$DATA "$ROOT/bench/h2.sh" --lib="$LIB" --build="$BUILD" --reps=$((QUICK ? 4 : 8)) \
    --dur=$((QUICK ? 1 : 2)) >/dev/null 2>"$T/h2.log" || log "bench/h2.sh failed: $(tail -n 3 "$T/h2.log")"
cat "$DATA/h2.txt" >>"$DATA/results.txt"

# /bin/true: instructions (deterministic) for bare, an empty preloaded object, and the agent.
cg_total() { grep -o 'Collected : [0-9]*' "$1" | awk '{print $3}'; }
for v in bare empty agent; do
    case $v in bare) pre="" ;; empty) pre=$BB/libsw_bench_empty.so ;; agent) pre=$LIB ;; esac
    env ${pre:+LD_PRELOAD=$pre} valgrind --tool=callgrind --callgrind-out-file="$T/true.$v" \
        /bin/true 2>"$T/true.$v.log"
    res "ir_true_$v" "$(cg_total "$T/true.$v.log")"
done
python3 "$DIFF" "$T/true.bare" "$T/true.agent" 1 10 >"$DATA/cg_true_agent.txt"

# ---------------------------------------------------------------- 4. start-up, RSS, threads
log "start-up of /bin/true ($START_RUNS paired rounds)"
"$BB/sw_bench_startup" "$START_RUNS" bare= "empty=$BB/libsw_bench_empty.so" "agent=$LIB" \
    -- /bin/true >"$DATA/startup.txt"
while read -r label rest; do
    res "true_${label}_median_us" "$(kv median_us "$rest")"
    res "true_${label}_ratio" "$(kv ratio_median "$rest")"
    res "true_${label}_ratio_p10" "$(kv ratio_p10 "$rest")"
    res "true_${label}_ratio_p90" "$(kv ratio_p90 "$rest")"
    res "true_${label}_maxrss_kb" "$(kv maxrss_kb "$rest")"
done <"$DATA/startup.txt"

# Start-up of a traced server: spawn -> its first response (and its second: the first segment's
# work, the ring's creation, comes after the first response), paired rounds, the server stopped
# (SIGTERM) and reaped in each; the bench's reporter runs, so the agent starts none.
# srv_start NAME ROUNDS PATH PORT VARIANTS... -- CMD...
srv_start() {
    local name=$1 rounds=$2 path=$3 port=$4
    shift 4
    "$BB/sw_bench_startup" "$rounds" "--serve=$port:$path" "$@" >"$DATA/startup_$name.txt"
    while read -r label rest; do
        local k
        for k in median_us ratio_median ratio_p10 ratio_p90 second_median_us second_ratio_median \
            second_ratio_p10 second_ratio_p90 maxrss_kb; do
            res "start_${name}_${label}_$k" "$(kv $k "$rest")"
        done
    done <"$DATA/startup_$name.txt"
}
log "start-up of the minimal server to its first responses ($START_RUNS paired rounds)"
SP=$(free_port)
srv_start mini "$START_RUNS" /api/orders "$SP" bare= "empty=$BB/libsw_bench_empty.so" \
    "agent=$LIB" -- "$BB/sw_bench_server" http-at "$SP" 2
log "start-up of nginx (master and worker) to its first responses ($((START_RUNS / 4)) paired rounds)"
SP=$(free_port)
mkdir -p "$T/ng-start"
nginx_conf "$T/ng-start" "$SP" 64 1000 0 "location / { root $T/www; }"
srv_start nginx $((START_RUNS / 4)) /small.txt "$SP" bare= "agent=$LIB" -- \
    "$(command -v nginx)" -c "$T/ng-start/nginx.conf" -p "$T/ng-start" -g 'daemon off;'

# The minimal server, native: RSS and threads after N keep-alive requests (it waits for one
# more, so it can be inspected alive), with and without the agent.
log "minimal server RSS and threads"
for v in bare agent; do
    pre=""
    [ $v = agent ] && pre=$LIB
    rm -f "$T/ms.port"
    env ${pre:+LD_PRELOAD=$pre} "$BB/sw_bench_server" http "$T/ms.port" 20001 &
    msp=$!
    wait_file "$T/ms.port"
    "$BB/sw_bench_client" "$(cat "$T/ms.port")" 20000
    res "mini_${v}_hwm_kb" "$(awk '/^VmHWM/{print $2}' "/proc/$msp/status")"
    res "mini_${v}_rss_parts" "$(rss_parts $msp)"
    res "mini_${v}_threads" "$(awk '/^Threads/{print $2}' "/proc/$msp/status")"
    "$BB/sw_bench_client" "$(cat "$T/ms.port")" 1
    wait $msp
done

fi # sections 3 and 4

# ---------------------------------------------------------------- 1. nginx pairs under wrk
# ng_start NAME PORT CONFIG(all|s10|ab|none|floor) [UPSTREAM_PORT]: one master + one worker;
# floor: bench/interpose_floor.c preloaded instead of the agent.
ng_start() {
    local name=$1 port=$2 cfg=$3 up=${4:-} d=$T/ng-$1 loc
    mkdir -p "$d"
    if [ -n "$up" ]; then
        loc="location / { proxy_pass http://up_$name; proxy_http_version 1.1;
                          proxy_set_header Connection \"\"; }"
    else
        loc="location / { root $T/www; }"
    fi
    nginx_conf "$d" "$port" 1024 1000000 0 "$loc" \
        "$([ -n "$up" ] && echo "upstream up_$name { server 127.0.0.1:$up; keepalive 32; }")"
    if [ "$cfg" = none ]; then
        nginx -c "$d/nginx.conf" -p "$d" -g 'daemon off;' >"$d/out.log" 2>&1 &
    elif [ "$cfg" = floor ]; then # the agent's calls interposed and only forwarded
        LD_PRELOAD=$BB/libsw_bench_interpose_floor.so \
            nginx -c "$d/nginx.conf" -p "$d" -g 'daemon off;' >"$d/out.log" 2>&1 &
    else
        SW_AGENT_CONFIG=$T/$cfg.config SW_AGENT_NAME="ng-$name" LD_PRELOAD=$LIB \
            nginx -c "$d/nginx.conf" -p "$d" -g 'daemon off;' >"$d/out.log" 2>&1 &
    fi
    PIDS+=($!)
    wait_port "$port"
}
ng_pids() { # NAME... -> master and worker pids
    local n m
    for n in "$@"; do
        m=$(cat "$T/ng-$n/nginx.pid")
        echo "$m" $(ps --ppid "$m" -o pid= || true)
    done
}
ng_workers() {
    local n
    for n in "$@"; do ps --ppid "$(cat "$T/ng-$n/nginx.pid")" -o pid= || true; done
}
pin() { # CORE PID... (a node process with all its threads: taskset -p alone moves only the one)
    local c=$1 p
    shift
    for p in "$@"; do
        if grep -qx "$p" "$T"/node-*.pid 2>/dev/null; then
            taskset -apc "$c" "$p" >/dev/null
        else
            taskset -pc "$c" "$p" >/dev/null
        fi
    done
}

ring_sums() { # -> "committed dropped sent shed" summed over every traced process of the runtime dir
    # A ring's own counters (the `rings:` lines, read from the ring files) for the processes whose
    # ring is still there; the reporter's last counts (its `process ... gone` lines) for those whose
    # ring it already removed: pairs renew the nginx workers every repetition (ng_renew).
    "$CLI" status --runtime-dir "$RUN" 2>/dev/null | awk '
        function kv(k,   i, v) { for (i = 1; i <= NF; i++) if ($i ~ "^" k "=") { v = $i; sub(/.*=/, "", v); return v + 0 } return 0 }
        /^  pid / { rc[$2] = kv("committed"); rd[$2] = kv("dropped"); rh[$2] = kv("shed") }
        /^    process pid=/ { p = $2; sub(/pid=/, "", p); pc[p] = kv("committed"); pd[p] = kv("dropped"); ph[p] = kv("shed") }
        /^    sent=/ { split($1, a, "="); s = a[2] }
        END { for (p in rc) { c += rc[p]; d += rd[p]; h += rh[p] }
              for (p in pc) if (!(p in rc)) { c += pc[p]; d += pd[p]; h += ph[p] }
              print c + 0, d + 0, s + 0, h + 0 }'
}
# ng_renew NAME...: new worker processes for these instances (SIGHUP to each master: nginx starts
# new workers and the old ones exit once idle). A process's placement (its heap, stack and
# mappings, the physical pages and cache sets they get) makes it a few percent faster or slower
# for its whole life: with the same two workers in every repetition, that luck biased every
# ratio of a bench run the same way (paced p99 1.02x in one run, 1.09x in the next, the pairs
# with almost no tracing moving with it). Fresh workers every repetition turn it into spread
# between repetitions, which the medians and the report's intervals see.
ng_renew() {
    local n m old new i
    for n in "$@"; do
        m=$(cat "$T/ng-$n/nginx.pid")
        old=" $(ps --ppid "$m" -o pid= | tr -s ' \n' ' ') "
        kill -HUP "$m"
        for i in $(seq 200); do # 10 s at most
            new=$(ps --ppid "$m" -o pid= | tr -s ' \n' ' ')
            local gone=1 p
            for p in $old; do case " $new " in *" $p "*) gone=0 ;; esac; done
            [ -n "${new// /}" ] && [ $gone = 1 ] && break
            sleep 0.05
        done
    done
}

# The servers of a pair: nginx instances (ng_start) or node processes (node_start; their pid in
# $T/node-NAME.pid). srv_pids: every process to pin; srv_workers: those whose CPU is counted;
# srv_renew: fresh nginx workers (ng_renew; a node process is kept for the whole pair).
is_node() { [ -f "$T/node-$1.pid" ]; }
srv_pids() {
    local n
    for n in "$@"; do if is_node "$n"; then cat "$T/node-$n.pid"; else ng_pids "$n"; fi; done
}
srv_workers() {
    local n
    for n in "$@"; do if is_node "$n"; then cat "$T/node-$n.pid"; else ng_workers "$n"; fi; done
}
srv_renew() {
    local n
    for n in "$@"; do is_node "$n" || ng_renew "$n"; done
}

# pair NAME A_PORT "A_NAMES" B_PORT "B_NAMES" [DELAY_MS [CONNS]]: REPS runs of DUR s, both sides
# at once; side A = bare, side B = traced (nginx instances, or node processes: srv_pids). Appends
# one line per side per rep to $DATA/pair_NAME.txt: rep side core requests rps p50 p90 p99 p999
# errors cpu_ticks cpu_ns. PAIR_REPS and PAIR_DUR override REPS and DUR; PAIR_PATH the URL path
# (/small.txt); PAIR_PRE and PAIR_POST name commands run just before and after each measured run
# (after its warm-up).
pair() {
    local name=$1 pa=$2 na=$3 pb=$4 nb=$5 rep ca cb CONNS=${7:-$CONNS} REPS=${PAIR_REPS:-$REPS}
    local DUR=${PAIR_DUR:-$DUR} PAIR_PATH=${PAIR_PATH:-/small.txt}
    export SW_BENCH_DELAY_MS=${6:-0}
    : >"$DATA/pair_$name.txt"
    # Warm up both sides (connections, caches, the reporter's first batches).
    wrk -t1 -c$CONNS -d1s "http://127.0.0.1:$pa$PAIR_PATH" >/dev/null &
    local pw=$!
    wrk -t1 -c$CONNS -d1s "http://127.0.0.1:$pb$PAIR_PATH" >/dev/null
    wait $pw
    local r0 rs0 s0
    r0=$(cpu_ticks $REP_PID)
    s0=$(cpu_ticks $STUB_PID)
    rs0=$(ring_sums)
    for rep in $(seq "$REPS"); do
        if [ $((rep % 2)) -eq 1 ]; then ca=$CORE_A cb=$CORE_B; else ca=$CORE_B cb=$CORE_A; fi
        srv_renew $na $nb
        pin "$ca" $(srv_pids $na)
        # swagent-reporter and collector-stub (standing in for the OAP) run on the traced side's
        # core: every cost of tracing is charged to the traced side, never to the bare one (an
        # unpinned stub lands on either core and flatters the ratio when it slows the bare side).
        pin "$cb" $(srv_pids $nb) $REP_PID $STUB_PID
        # Warm up the new workers (ng_renew) with the load of the run, one second.
        taskset -c "$ca" wrk -t1 -c$CONNS -d1s -s "$ROOT/bench/wrk_summary.lua" \
            "http://127.0.0.1:$pa$PAIR_PATH" >/dev/null &
        local pw1=$!
        taskset -c "$cb" wrk -t1 -c$CONNS -d1s -s "$ROOT/bench/wrk_summary.lua" \
            "http://127.0.0.1:$pb$PAIR_PATH" >/dev/null
        wait $pw1
        local wa wb ta tb
        ${PAIR_PRE:-:}
        wa=$(srv_workers $na) wb=$(srv_workers $nb)
        ta=$(cpu_ticks $wa) tb=$(cpu_ticks $wb)
        local nsa nsb
        nsa=$(cpu_ns $wa) nsb=$(cpu_ns $wb)
        taskset -c "$ca" wrk -t1 -c$CONNS -d${DUR}s -s "$ROOT/bench/wrk_summary.lua" \
            "http://127.0.0.1:$pa$PAIR_PATH" >"$T/wrk.$name.$rep.a" &
        local pwa=$!
        taskset -c "$cb" wrk -t1 -c$CONNS -d${DUR}s -s "$ROOT/bench/wrk_summary.lua" \
            "http://127.0.0.1:$pb$PAIR_PATH" >"$T/wrk.$name.$rep.b" &
        local pwb=$!
        wait $pwa $pwb
        ta=$(($(cpu_ticks $wa) - ta)) tb=$(($(cpu_ticks $wb) - tb))
        nsa=$(($(cpu_ns $wa) - nsa)) nsb=$(($(cpu_ns $wb) - nsb))
        ${PAIR_POST:-:}
        local side f line
        for side in a b; do
            f=$T/wrk.$name.$rep.$side
            line=$(grep '^SWBENCH' "$f")
            local req dur
            req=$(kv requests "$line") dur=$(kv duration_us "$line")
            local core=$ca ticks=$ta ns=$nsa
            [ $side = b ] && core=$cb ticks=$tb ns=$nsb
            echo "$rep $side $core $req $(awk -v r="$req" -v d="$dur" 'BEGIN{printf "%.0f", r/(d/1e6)}') \
$(kv p50 "$line") $(kv p90 "$line") $(kv p99 "$line") $(kv p999 "$line") $(kv errors "$line") $ticks $ns" \
                >>"$DATA/pair_$name.txt"
        done
    done
    echo $(($(cpu_ticks $REP_PID) - r0)) $(($(cpu_ticks $STUB_PID) - s0)) \
        >"$DATA/pair_$name.reporter_ticks"
    # Segments committed to / dropped at the rings, sent by the reporter, and traces shed (not
    # started: the ring had no room) during the pair (the warm-up included); the traced side is
    # the only one that changes them.
    sleep 1.5 # the reporter's status file is rewritten every second
    local rs1
    rs1=$(ring_sums)
    echo $rs0 $rs1 | awk '{print $5 - $1, $6 - $2, $7 - $3, $8 - $4}' >"$DATA/pair_$name.ring"
    "$CLI" status --runtime-dir "$RUN" >"$DATA/pair_$name.status" 2>&1 || true
}

# ---------------------------------------------------------------- --node: the Node.js pairs
# node_start NAME PORTVAR PRELOAD: bench/node_server.js (one process: the event loop on its main
# thread, libuv's and V8's threads beside it), traced with PRELOAD (empty: bare); the port it
# listens on goes into the variable named PORTVAR.
node_start() {
    local name=$1 port=$2 pre=$3
    rm -f "$T/node-$name.port"
    env SW_AGENT_CONFIG="$T/all.config" SW_AGENT_NAME="node-$name" ${pre:+LD_PRELOAD=$pre} \
        node "$ROOT/bench/node_server.js" "$T/node-$name.port" >"$T/node-$name.log" 2>&1 &
    PIDS+=($!)
    echo $! >"$T/node-$name.pid"
    wait_file "$T/node-$name.port"
    printf -v "$port" %s "$(cat "$T/node-$name.port")"
}
# cg_node TAG N PRELOAD: node under callgrind serving N requests on one keep-alive connection,
# each thread in its own file ($T/nd.TAG.N-01 is the main thread, which runs the event loop and
# every interposed call of a request), stopped with SIGTERM (node_server.js exits on it).
cg_node() {
    local tag=$1 n=$2 pre=$3
    rm -f "$T/nd.port"
    env SW_AGENT_CONFIG="$T/all.config" ${pre:+LD_PRELOAD=$pre} valgrind --tool=callgrind \
        --trace-children=no --separate-threads=yes --dump-instr=no \
        --callgrind-out-file="$T/nd.$tag.$n" node "$ROOT/bench/node_server.js" "$T/nd.port" \
        2>"$T/nd.$tag.$n.log" &
    local vp=$!
    PIDS+=($vp)
    for _ in $(seq 600); do [ -s "$T/nd.port" ] && break; sleep 0.1; done
    "$BB/sw_bench_client" "$(cat "$T/nd.port")" "$n" /
    kill -TERM $vp
    wait $vp || true
}
if [ $NODE = 1 ]; then
    DIFF=$ROOT/bench/cg_diff.py
    if [ $QUICK = 1 ]; then ND_N1=500 ND_N2=1500 ND_REPS=4 ND_DUR=4; else
        ND_N1=1000 ND_N2=3000 ND_REPS=8 ND_DUR=6; fi
    log "node: instructions per request on node's main thread (callgrind, $ND_N1 vs $ND_N2 requests)"
    for n in $ND_N1 $ND_N2; do
        cg_node bare "$n" ""
        cg_node agent "$n" "$LIB"
    done
    ND_U=$((ND_N2 - ND_N1))
    # node's own instructions per request move by a few thousand between runs (V8 compiles and
    # collects on its own schedule): the agent's share is its library's functions alone
    # (CG_OBJECT), which nothing but the requests drive.
    python3 "$DIFF" "$T/nd.bare.$ND_N1-01" "$T/nd.bare.$ND_N2-01" $ND_U 8 >"$DATA/cg_node_bare.txt"
    python3 "$DIFF" "$T/nd.agent.$ND_N1-01" "$T/nd.agent.$ND_N2-01" $ND_U 8 >"$DATA/cg_node_agent.txt"
    CG_OBJECT=libswagent python3 "$DIFF" "$T/nd.agent.$ND_N1-01" "$T/nd.agent.$ND_N2-01" $ND_U 12 \
        >"$DATA/cg_node_lib.txt"
    res ir_node_bare "$(awk '$1=="total"{print $2}' "$DATA/cg_node_bare.txt")"
    res ir_node_agent "$(awk '$1=="total"{print $2}' "$DATA/cg_node_agent.txt")"
    res ir_node_lib "$(awk '$1=="total"{print $2}' "$DATA/cg_node_lib.txt")"
    # The other threads (libuv's pool, V8's platform workers): all their instructions per request.
    for v in bare agent; do
        res "ir_node_${v}_others" "$(python3 - "$T/nd.$v.$ND_N1" "$T/nd.$v.$ND_N2" $ND_U <<'PY'
import glob, sys
def tot(base):
    s = 0
    for f in glob.glob(base + '-*'):
        if f.endswith('-01'):
            continue
        for l in open(f):
            if l.startswith('summary:') or l.startswith('totals:'):
                s += int(l.split()[1])
                break
    return s
print(f"{(tot(sys.argv[2]) - tot(sys.argv[1])) / float(sys.argv[3]):.1f}")
PY
)"
    done
    node_start bare P_NBARE ""
    node_start all P_NALL "$LIB"
    curl -sf "http://127.0.0.1:$P_NALL/" >/dev/null
    IDLE_LOAD=${SW_BENCH_IDLE_LOAD:-1}
    [ "$IDLE_LOAD" = 1 ] && idle_load_start "$CORE_A" "$CORE_B"
    res idle_load "$IDLE_LOAD"
    log "node, paced (2 ms think time per request and connection, 8 connections): bare vs agent (all), $((2 * ND_REPS)) x ${ND_DUR}s"
    PAIR_PATH=/ PAIR_REPS=$((2 * ND_REPS)) PAIR_DUR=$ND_DUR pair node_paced "$P_NBARE" bare \
        "$P_NALL" all 2 8
    log "node, saturated (8 connections): bare vs agent (all), $ND_REPS x ${ND_DUR}s"
    PAIR_PATH=/ PAIR_REPS=$ND_REPS PAIR_DUR=$ND_DUR pair node_sat "$P_NBARE" bare "$P_NALL" all 0 8
    res threads_node_all "$(awk '/^Threads/{print $2}' "/proc/$(cat "$T/node-all.pid")/status")"
    res threads_node_bare "$(awk '/^Threads/{print $2}' "/proc/$(cat "$T/node-bare.pid")/status")"
    [ "$IDLE_LOAD" = 1 ] && idle_load_stop
    log "writing $OUT/NODE.md"
    mkdir -p "$OUT/raw-node"
    cp "$DATA"/* "$OUT/raw-node/"
    python3 "$ROOT/bench/node_report.py" "$DATA" "$OUT" "$QUICK" "$ND_N1" "$ND_N2" "$ND_REPS" \
        "$ND_DUR"
    log "done: $OUT/NODE.md"
    exit 0
fi

P_BARE=$(free_port) P_ALL=$(free_port) P_S10=$(free_port) P_FLR=$(free_port)
P_PXB=$(free_port) P_PXBK=$(free_port) P_PXT=$(free_port) P_PXTK=$(free_port)
ng_start bare "$P_BARE" none
ng_start all "$P_ALL" "$AB_CFG" # all, unless --ab-sample
ng_start s10 "$P_S10" s10
[ -z "$AB_REPORTER$AB_LIB" ] && ng_start floor "$P_FLR" floor
ng_start pxbk "$P_PXBK" none
ng_start pxb "$P_PXB" none "$P_PXBK"
ng_start pxtk "$P_PXTK" all
ng_start pxt "$P_PXT" all "$P_PXTK"
# One traced request through the proxy chain must produce a joined trace (sanity).
curl -sf "http://127.0.0.1:$P_PXT/small.txt" >/dev/null
# Both cores busy under SCHED_IDLE during the pairs, so that neither halts between requests
# (bench/common.sh, idle_load_start): the traced core's reporter and collector-stub otherwise
# kept it from halting, and its wake-ups were faster than the bare core's.
IDLE_LOAD=${SW_BENCH_IDLE_LOAD:-1}
[ "$IDLE_LOAD" = 1 ] && idle_load_start "$CORE_A" "$CORE_B"
res idle_load "$IDLE_LOAD"

# ab_rounds NAME OTHER THIS: the A/B modes. AB_ROUNDS rounds of the paced pair (with --saturated
# the saturated one; 4 repetitions each) with variant A (OTHER) and B (THIS, this build's)
# alternated, A first in odd rounds and B first in even ones (A B B A ...), so that neither
# variant always follows the other. Three runs of the same floor on both sides
# (bench/HISTORY.md, "where the saturated cost is") put B/A 2-4 % from 1 either way in
# requests/s and nginx CPU per request, 7-9 % in p99: smaller differences are not resolved.
# ab_use_NAME V puts variant V in place before its pair. Prints the summary and writes
# bench/report/ab-NAME.txt (ab-NAME-saturated.txt).
ab_rounds() {
    local name=$1 other=$2 this=$3 round v order delay=1 mode="" suffix=""
    [ "$AB_SAT" = 1 ] && delay=0 mode=saturated suffix=-saturated
    for round in $(seq "$AB_ROUNDS"); do
        order="A B"
        [ $((round % 2)) = 0 ] && order="B A"
        for v in $order; do
            "ab_use_$name" $v
            log "A/B round $round of $AB_ROUNDS: $name $v${mode:+ ($mode)}"
            PAIR_REPS=4 pair "ab_${v}_$round" "$P_BARE" "bare" "$P_ALL" "all" $delay
        done
    done
    python3 "$ROOT/bench/ab_summary.py" "$DATA" "$other" "$this" $mode |
        tee "$OUT/ab-$name$suffix.txt"
}
ab_use_lib() { # V: a fresh traced instance with V's library (the port changes too)
    local m
    m=$(cat "$T/ng-all/nginx.pid")
    kill "$m"
    for _ in $(seq 100); do kill -0 "$m" 2>/dev/null || break; sleep 0.1; done
    if [ "$1" = A ]; then LIB=$AB_LIB; else LIB=$LIB_B; fi
    P_ALL=$(free_port)
    ng_start all "$P_ALL" "$AB_CFG"
}
ab_use_reporter() { # V: V's reporter, restarted
    stop_reporter
    if [ "$1" = A ]; then REPORTER=$AB_REPORTER; else REPORTER=$REP_B; fi
    start_reporter
}
if [ -n "$AB_LIB" ]; then
    [ -f "$AB_LIB" ] || { echo "bench: $AB_LIB does not exist" >&2; exit 2; }
    LIB_B=${AB_B:-$LIB}
    [ -f "$LIB_B" ] || { echo "bench: $LIB_B does not exist" >&2; exit 2; }
    ab_rounds lib "$AB_LIB" "$LIB_B"
    exit 0
fi
if [ -n "$AB_REPORTER" ]; then
    [ -x "$AB_REPORTER" ] || { echo "bench: $AB_REPORTER is not executable" >&2; exit 2; }
    REP_B=$REPORTER
    ab_rounds reporter "$AB_REPORTER" "$REP_B"
    exit 0
fi

# The instances not in a pair are idle (parked on whatever core) while a pair runs.
# The saturated pair holds the two targets of the issue's wording (requests/s and p99): twice the
# repetitions, so that the 90 % interval of its median (report.py's verdict) is narrower than
# its repetitions' min-max, which is all five repetitions give.
log "nginx static: bare vs agent (sample all), $((2 * REPS)) x ${DUR}s"
PAIR_REPS=$((2 * REPS)) pair all "$P_BARE" "bare" "$P_ALL" "all"
res threads_nginx_all "$(awk '/^Threads/{print $2}' /proc/"$(ng_workers all | head -1 | tr -d ' ')"/status)"
res threads_nginx_bare "$(awk '/^Threads/{print $2}' /proc/"$(ng_workers bare | head -1 | tr -d ' ')"/status)"
res rss_nginx_all_parts "$(rss_parts "$(ng_workers all | head -1 | tr -d ' ')")"
res rss_nginx_bare_parts "$(rss_parts "$(ng_workers bare | head -1 | tr -d ' ')")"
res hwm_nginx_all_kb "$(awk '/^VmHWM/{print $2}' /proc/"$(ng_workers all | head -1 | tr -d ' ')"/status)"
res hwm_nginx_bare_kb "$(awk '/^VmHWM/{print $2}' /proc/"$(ng_workers bare | head -1 | tr -d ' ')"/status)"
# The same saturated pair with a library that interposes the agent's calls and only forwards
# them: what the pair's arrangement gives with no agent work at all (the reporter and
# collector-stub idle on the "traced" core; a process's placement; the cores' differences),
# the floor under the two saturated targets (bench/HISTORY.md, "where the saturated cost is").
log "nginx static: bare vs interposition floor (bench/interpose_floor.c), $((2 * REPS)) x ${DUR}s"
PAIR_REPS=$((2 * REPS)) pair floor "$P_BARE" "bare" "$P_FLR" "floor"
log "nginx static: bare vs agent (sample_n_per_3_secs=10), $REPS x ${DUR}s"
pair s10 "$P_BARE" "bare" "$P_S10" "s10"
# The paced pair is the latency target's row, and its p99 ratio swings between repetitions
# (0.8-1.7 per repetition on this VM: a stall on one core hits one side only), so its median
# needs many repetitions: four times the others (report.py gives the median's 90 % interval).
log "nginx static, paced (1 ms think time per request and connection): bare vs agent (all), $((4 * REPS)) x ${DUR}s"
PAIR_REPS=$((4 * REPS)) pair paced "$P_BARE" "bare" "$P_ALL" "all" 1
log "the same, one connection (no queueing behind the other connections' requests), $((2 * REPS)) x ${DUR}s"
# One request in flight: a single stall of ~100 us moves its p99 by tens of percent, so twice the
# repetitions.
PAIR_REPS=$((2 * REPS)) pair paced_c1 "$P_BARE" "bare" "$P_ALL" "all" 1 1
# The reporter runs during each repetition's warm-up, has emptied the traced worker's ring
# (2 MiB: ~12,000 segments) when it is stopped, and runs again after the measured run, which is
# one second (~10,000 requests) so that the ring holds all its segments: every request is traced,
# none shed (the segments table shows it; a longer run filled the ring within ~1 s and then
# measured mostly untraced requests). A 32 MiB ring instead cost ~1 us more per request
# (then with a page fault on each new page of the ring's first turn; cache misses on every
# record), a cost of its own.
# Four times the repetitions of one second: 1 s runs have fewer requests in each p99.
drained() { # every ring's committed segments acknowledged by the collector (10 s at most)
    local _
    for _ in $(seq 100); do
        [ "$("$CLI" status --runtime-dir "$RUN" 2>/dev/null | awk '/^  pid / {
            for (i = 1; i <= NF; i++) if ($i ~ /^pending=/) { sub(/pending=/, "", $i); p += $i } }
            END { print p + 0 }')" = 0 ] && return 0
        sleep 0.1
    done
    log "the rings were not drained in 10 s"
}
stop_drained() { drained && kill -STOP "$REP_PID"; }
log "the same as the paced pair, swagent-reporter stopped (SIGSTOP: the application's share), $((4 * REPS)) x 1s"
PAIR_PRE=stop_drained PAIR_POST="kill -CONT $REP_PID" PAIR_DUR=1 PAIR_REPS=$((4 * REPS)) \
    pair paced_stopped "$P_BARE" "bare" "$P_ALL" "all" 1
log "the same, swagent-reporter at normal priority (reporter_sched_idle=false, reporter_nice=0)"
stop_reporter
start_reporter "$T/nice0.config"
pair paced_nice0 "$P_BARE" "bare" "$P_ALL" "all" 1
stop_reporter
start_reporter
log "nginx proxy -> backend nginx: bare vs traced (sw8 inserted), $REPS x ${DUR}s"
pair proxy "$P_PXB" "pxb pxbk" "$P_PXT" "pxt pxtk"
res rss_nginx_proxy_traced_parts "$(rss_parts "$(ng_workers pxt | head -1 | tr -d ' ')")"
res rss_nginx_proxy_bare_parts "$(rss_parts "$(ng_workers pxb | head -1 | tr -d ' ')")"
res hwm_nginx_proxy_traced_kb "$(awk '/^VmHWM/{print $2}' /proc/"$(ng_workers pxt | head -1 | tr -d ' ')"/status)"
res hwm_nginx_proxy_bare_kb "$(awk '/^VmHWM/{print $2}' /proc/"$(ng_workers pxb | head -1 | tr -d ' ')"/status)"
res reporter_sent "$(sed -n 's/.*sent=\([0-9]*\).*/\1/p' "$DATA/pair_proxy.status" | head -1)"

[ "$IDLE_LOAD" = 1 ] && idle_load_stop
# ---------------------------------------------------------------- 5. reporter throughput
# rep_run TAG CONFIG N [valgrind...]: a fresh runtime dir and collector-stub (pinned to core A),
# sw_bench_fill commits N records, then swagent-reporter (pinned to core B) drains them.
rep_run() {
    local tag=$1 cfg=$2 n=$3
    shift 3
    local d=$T/rep-$tag
    mkdir -p "$d" && mkdir -m 700 "$d/run"
    "$STUB" --listen 127.0.0.1:0 --port-file "$d/stub.port" --segments /dev/null --discard \
        2>"$d/stub.log" &
    local stub=$!
    PIDS+=($stub)
    wait_file "$d/stub.port"
    local c=127.0.0.1:$(cat "$d/stub.port")
    taskset -pc "$CORE_A" $stub >/dev/null
    "$BB/sw_bench_fill" --dir "$d/run" --collector "$c" --count "$n" --timeout 300 \
        >"$d/fill.out" 2>"$d/fill.err" &
    local fill=$!
    PIDS+=($fill)
    wait_file "$d/fill.out"
    SW_AGENT_CONFIG=$cfg taskset -c "$CORE_B" "$@" "$REPORTER" --foreground \
        --runtime-dir "$d/run" --collector "$c" --idle-exit 1 2>"$d/reporter.log" &
    local rep=$!
    PIDS+=($rep)
    wait $fill || log "reporter run $tag failed: $(cat "$d/fill.err")"
    local line
    line=$(tail -1 "$d/fill.out")
    if [ $# -eq 0 ]; then
        res "rep_${tag}_ticks" "$(cpu_ticks $rep)"
        res "rep_${tag}_stub_ticks" "$(cpu_ticks $stub)"
        res "rep_${tag}_done_ms" "$(kv done_ms "$line")"
        res "rep_${tag}_steady" "$(kv steady_per_s "$line")"
        res rep_bytes "$(kv bytes_per_record "$(head -1 "$d/fill.out")")"
    fi
    wait $rep 2>/dev/null || true # exits by itself: nothing left, its only producer gone
    # Delivered = acknowledged by the collector (the ring's consumed counter reached N).
    res "rep_${tag}_delivered" "$([ -n "$(kv done_ms "$line")" ] && echo "$n" || echo 0)"
    kill $stub 2>/dev/null || true
    wait $stub 2>/dev/null || true
    # collector-stub --discard logs "received N segment(s) in M message(s) (B wire bytes)" at exit.
    res "rep_${tag}_wire_bytes" "$(sed -n 's/.*(\([0-9]*\) wire bytes).*/\1/p' "$d/stub.log" | tail -1)"
}
write_config "$T/nogzip.config" "swagent.grpc_gzip=false"
res rep_n "$REP_N"
log "reporter throughput: $REP_N segments, gzip on (the default)"
rep_run gzip "$T/all.config" "$REP_N"
log "reporter throughput: $REP_N segments, gzip off"
rep_run plain "$T/nogzip.config" "$REP_N"
if [ "$REP_CG_N1" -gt 0 ]; then
    log "reporter instructions per segment (callgrind, $REP_CG_N1 vs $REP_CG_N2 segments)"
    rep_cg_clean=1
    for n in $REP_CG_N1 $REP_CG_N2; do
        # Under valgrind the reporter's first call can time out before the connection is up; it
        # then spools and replays, which would be counted per segment: run again (5 tries; the
        # report says so when every try spooled).
        for _try in 1 2 3 4 5; do
            rm -rf "$T/rep-cg$n"
            : >"$T/swagent-reporter.log" # logging.dir=$T (every reporter here logs there)
            rep_run "cg$n" "$T/all.config" "$n" valgrind --tool=callgrind \
                --callgrind-out-file="$T/rep.cg.$n"
            grep -Eq 'spooled [0-9]+ seg|(collect|replay) .* failed \(' "$T/swagent-reporter.log" ||
                break
            [ "$_try" = 5 ] && rep_cg_clean=0
            log "reporter under valgrind spooled or failed a call: measuring again"
        done
    done
    res rep_cg_clean "$rep_cg_clean"
    python3 "$DIFF" "$T/rep.cg.$REP_CG_N1" "$T/rep.cg.$REP_CG_N2" $((REP_CG_N2 - REP_CG_N1)) 12 \
        >"$DATA/cg_reporter.txt"
    res ir_reporter_seg "$(awk '$1=="total"{print $2}' "$DATA/cg_reporter.txt")"
fi

# ---------------------------------------------------------------- report
log "writing $OUT/REPORT.md and chart.png"
rm -rf "$OUT/raw"
mkdir -p "$OUT/raw"
cp "$DATA"/* "$OUT/raw/"
python3 "$ROOT/bench/report.py" "$DATA" "$OUT" "$CLK_TCK" "$QUICK" "$REPS" "$DUR" "$CONNS" \
    "$CG_N1" "$CG_N2" "$SC_N1" "$SC_N2" "$START_RUNS"
(cd "$OUT" && gnuplot chart.gp)
log "done: $OUT/REPORT.md"
