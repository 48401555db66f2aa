#!/usr/bin/env bash
# bench/insitu.sh - the time the agent's own code takes per request inside a real nginx, in
# nanoseconds, syscalls excluded (bench/insitu_shim.c: TSC ticks of the whole interposed call
# minus the ticks inside the real libc call, read by two shims around libswagent.so).
#
# One nginx per variant (one process each, master_process off, all pinned to core 1) serves a
# 612-byte file; wrk (16 keep-alive connections, core 0, saturating) loads one of them at a
# time, the variants taking turns in short rounds (default 12 rounds of 2 s) so that the VM's
# slow and fast stretches fall on all of them alike:
#   floor  the two shims without the agent (their own cost: rdtscp, the extra calls)
#   agent  this build's libswagent.so, sampling every request (swagent-reporter and
#          collector-stub --discard run on core 0 under SCHED_IDLE)
#   other  --lib=PATH: another libswagent.so (an A/B of two builds in one run), or
#          build-bench/bench/libsw_bench_capture_floor.so: the floor of a design that only
#          frames and copies each head on the application's thread (bench/capture_floor.c)
# Printed: per variant the median over the rounds of ns per request outside the real calls,
# the agent's share (minus the floor's median) with min-max, that share by interposed call
# (recv: the request; writev: the response head; sendfile: the body, the span's end and its
# record), and with --lib the difference other - agent paired by round. This is the agent's
# cost as the application thread sees it, cold caches after each syscall included, which
# callgrind's instruction counts do not show and which the paired timings of bench/run.sh
# resolve only to a few percent on a 2-core VM. Then nginx's whole CPU time per request
# (schedstat over each round / wrk's requests): the agent's code and whatever it costs nginx
# and the kernel around it, far noisier (one variant at a time, each round its own stretch).
#   --paced  wrk waits 1 ms before each request on each connection (bench/run.sh's paced
#            pair): the caches are colder between the bursts than under saturation.
#   --sample=N  agent.sample_n_per_3_secs=N for the agent variants (default: every request
#            sampled). With N=10 almost every request is unsampled: the path of bench/run.sh's
#            sample_n_per_3_secs=10 pair, and of its saturated pair's shed requests.
#   --conns=N  wrk's connections (default 16). With few, at --paced, a request finds the caches
#            as cold as a server at a few hundred requests/s does (bench/run.sh's one-connection
#            pair): the shims then skip 2,048 requests and write every 256 (SHIM_WARM,
#            SHIM_EVERY), and rounds should be longer (--dur=10: ~9,000 requests at -c1).
#   --node   the server is bench/node_server.js (Node's http server, a one-line handler; one
#            node process per variant, all its threads on core 1) instead of nginx: node reads
#            with read and answers with one writev, so the by-call figures are read, writev and
#            write (libuv's wake-ups of the loop; a few per thousand requests)
#   --breakdown  one more variant, probed: this build's agent with timing wrappers around the
#            request path's four big steps (bench/probes.c: parsing the request head, parsing
#            the response head, starting the entry span, ending it with its ring record, and
#            within that the ring write) and the connection layer's clock reads, each parse
#            run again warm; printed: ns per
#            call of each, cold and warm, what is left of the agent's time (the connection
#            layer, the interposed calls), and what the probes themselves cost (probed - agent,
#            paired by round).
# x86-64 only (rdtscp). Loopback only; every process started here is stopped by its PID.
#   bench/insitu.sh [--lib=OTHER/libswagent.so] [--paced] [--sample=N] [--breakdown]
#                   [--conns=N] [--rounds=N] [--dur=SECONDS] [--node]
#   (INSITU_KEEP=1 keeps the temporary directory: each nginx's records, the logs.)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ROUNDS=12
DUR=2
PACED=0
SAMPLE=""
OTHER=""
BREAKDOWN=0
CONNS=16
NODE=0
for a in "$@"; do
    case $a in
    --lib=*) OTHER=$(readlink -f "${a#--lib=}") ;;
    --rounds=*) ROUNDS=${a#--rounds=} ;;
    --dur=*) DUR=${a#--dur=} ;;
    --paced) PACED=1 ;;
    --sample=*) SAMPLE=${a#--sample=} ;;
    --breakdown) BREAKDOWN=1 ;;
    --node) NODE=1 ;;
    --conns=*) CONNS=${a#--conns=} ;;
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
SERVER=nginx
[ $NODE = 1 ] && SERVER=node
for tool in cmake wrk $SERVER taskset chrt python3; do
    command -v $tool >/dev/null || { echo "insitu: $tool not found (scripts/deps.sh)" >&2; exit 1; }
done
case $(uname -m) in x86_64) ;; *) echo "insitu: x86-64 only" >&2; exit 1 ;; esac

BUILD=${SW_BENCH_BUILD:-$ROOT/build-bench}
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSW_BUILD_BENCH=ON \
    -DSW_BUILD_TESTS=OFF >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target swagent swagent-reporter swagent-cli collector-stub \
    sw_bench_insitu_outer sw_bench_insitu_inner sw_bench_capture_floor sw_bench_probed >/dev/null
LIB=$BUILD/agent/libswagent.so
OUTER=$BUILD/bench/libsw_bench_insitu_outer.so
INNER=$BUILD/bench/libsw_bench_insitu_inner.so
PROBED=$BUILD/bench/libsw_bench_probed.so

T=$(mktemp -d /tmp/swagent-insitu.XXXXXX)
chmod 755 "$T"
PIDS=()
RUN=$T/run
cleanup() {
    set +e
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    sleep 0.3
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    [ -n "${INSITU_KEEP:-}" ] || rm -rf "$T" "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
BENCH_TAG=insitu
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"

mkdir -p "$T/www"
RUN=$(rings_dir "$BUILD/agent/swagent" swagent-insitu "$T/run") # as the agent's default would
mkdir -p "$RUN"
chmod 700 "$RUN"
head -c 612 /dev/zero | tr '\0' 'x' >"$T/www/small.txt"
taskset -c 0 chrt -i 0 "$BUILD/collector-stub/collector-stub" --listen 127.0.0.1:0 \
    --port-file "$T/stub.port" --segments /dev/null --discard 2>"$T/stub.log" &
PIDS+=($!)
wait_file "$T/stub.port"
COLLECTOR=127.0.0.1:$(cat "$T/stub.port")
cat >"$T/agent.config" <<EOF
collector.backend_service=$COLLECTOR
swagent.runtime_dir=$RUN
swagent.reporter_path=$BUILD/agent/swagent-reporter
agent.service_name=insitu
logging.dir=$T
${SAMPLE:+agent.sample_n_per_3_secs=$SAMPLE}
EOF
SW_AGENT_CONFIG=$T/agent.config taskset -c 0 "$BUILD/agent/swagent-reporter" --foreground \
    --runtime-dir "$RUN" --collector "$COLLECTOR" 2>"$T/reporter.log" &
PIDS+=($!)

WARMUP=2 # seconds of load before the first round: past the shims' warm-up requests
if [ "$CONNS" -lt 16 ]; then
    export SHIM_WARM=2048 SHIM_EVERY=256
    WARMUP=4
fi
VARIANTS="floor agent"
[ -n "$OTHER" ] && VARIANTS="$VARIANTS other"
[ "$BREAKDOWN" = 1 ] && VARIANTS="$VARIANTS probed"
declare -A PORT OUTF NGPID
for v in $VARIANTS; do
    d=$T/ng-$v
    port=$(free_port)
    PORT[$v]=$port
    mkdir -p "$d"
    nginx_conf "$d" "$port" 256 100000000 1 "location / { root $T/www; }"
    case $v in
    floor) pre="$OUTER $INNER" ;;
    agent) pre="$OUTER $LIB $INNER" ;;
    other) pre="$OUTER $OTHER $INNER" ;;
    probed) pre="$OUTER $PROBED $INNER" ;;
    esac
    if [ $NODE = 1 ]; then # its own port (node_server.js writes it), all its threads on core 1
        PROBE_OUT=$d/probe SHIM_OUT=$d/out SW_AGENT_CONFIG=$T/agent.config LD_PRELOAD="$pre" \
            taskset -c 1 node "$ROOT/bench/node_server.js" "$d/port" 2>"$d/stderr" &
        PIDS+=("$!")
        NGPID[$v]=$!
        wait_file "$d/port"
        PORT[$v]=$(cat "$d/port")
    else
        PROBE_OUT=$d/probe SHIM_OUT=$d/out SW_AGENT_CONFIG=$T/agent.config LD_PRELOAD="$pre" \
            taskset -c 1 nginx -c "$d/nginx.conf" -p "$d" 2>"$d/stderr" &
        PIDS+=("$!")
        NGPID[$v]=$!
        wait_port "$port"
    fi
    OUTF[$v]=$d/out.${NGPID[$v]}
done
# The interposed calls a request makes: nginx reads with recv and answers with writev and
# sendfile; node reads with read and answers with writev (write: libuv's wake-ups).
CALLS="recv writev sendfile"
URL_PATH=/small.txt
if [ $NODE = 1 ]; then
    CALLS="read writev write"
    URL_PATH=/
fi
export CALLS
# last VARIANT -> "requests ticks ghz C1 C2 C3" of its latest record, C1..C3 the ticks of $CALLS
last() {
    tail -1 "${OUTF[$1]}" | awk -v calls="$CALLS" '{
        for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
        n = split(calls, c, " ")
        printf "%s %s %s", f["requests"], f["ticks"], f["tsc_ghz"]
        for (i = 1; i <= n; i++) printf " %s", f[c[i]]
        print "" }'
}
# The probed variant's latest record (bench/probes.c): "finishes=N tsc_ghz=G pair=P name=CALLS:TICKS ..."
probe_last() { tail -1 "$T/ng-probed/probe.${NGPID[probed]}" 2>/dev/null || true; }
load() { # VARIANT SECONDS: wrk's requests -> $T/wrk.txt, nginx's CPU ns over the run -> CPU_NS
    local c0
    c0=$(cpu_ns "${NGPID[$1]}")
    SW_BENCH_DELAY_MS=$PACED taskset -c 0 wrk -t1 -c"$CONNS" -d"$2s" -s "$ROOT/bench/wrk_summary.lua" \
        "http://127.0.0.1:${PORT[$1]}$URL_PATH" >"$T/wrk.txt"
    sleep 0.1
    CPU_NS=$(($(cpu_ns "${NGPID[$1]}") - c0))
}
echo "insitu: $SERVER under wrk -c$CONNS$([ "$PACED" = 1 ] && echo ", 1 ms think time")${SAMPLE:+, agent.sample_n_per_3_secs=$SAMPLE}: $VARIANTS taking turns, $ROUNDS rounds of ${DUR}s each" >&2
declare -A PREV
for v in $VARIANTS; do
    load "$v" "$WARMUP" # warm-up: past the shims' first 16,384 requests (SHIM_WARM)
    [ -s "${OUTF[$v]}" ] || { echo "insitu: no record from variant $v" >&2; exit 1; }
    PREV[$v]=$(last "$v")
done
PROBE_PREV=""
if [ "$BREAKDOWN" = 1 ]; then
    PROBE_PREV=$(probe_last)
    [ -n "$PROBE_PREV" ] || { echo "insitu: no record from bench/probes.c" >&2; exit 1; }
fi
: >"$T/results.txt"
: >"$T/probes.txt"
for r in $(seq "$ROUNDS"); do
    # shellcheck disable=SC2086
    set -- $VARIANTS
    k=$(((r - 1) % $#))
    for v in "${@:k+1}" "${@:1:k}"; do
        load "$v" "$DUR"
        cur=$(last "$v")
        read -r r0 t0 _ a0 b0 c0 <<<"${PREV[$v]}"
        read -r r1 t1 g a1 b1 c1 <<<"$cur"
        PREV[$v]=$cur
        # ns per request in all, then by call ($CALLS)
        read -r ns by < <(python3 -c "n = max($r1 - $r0, 1) * $g
print(*(round(x / n, 1) for x in ($t1 - $t0, $a1 - $a0, $b1 - $b0, $c1 - $c0)))")
        n=$(sed -n 's/^SWBENCH requests=\([0-9]*\) .*/\1/p' "$T/wrk.txt")
        echo "$r $v $ns $by $((CPU_NS / (n > 0 ? n : 1)))" >>"$T/results.txt"
        echo "insitu: round $r $v: $((r1 - r0)) requests, $ns ns each outside the real calls" >&2
        if [ "$v" = probed ]; then
            # ns per call of each probed step over the round: "round name=ns ..."
            cur=$(probe_last)
            python3 -c '
import sys
def rec(line):
    f = dict(x.split("=", 1) for x in line.split())
    return float(f["tsc_ghz"]), {k: tuple(map(int, v.split(":"))) for k, v in f.items() if ":" in v}
g, a = rec(sys.argv[2])
_, b = rec(sys.argv[3])
n = {k: max(b[k][0] - a[k][0], 1) for k in b}
reads = (b["clock"][0] - a["clock"][0]) / n["finish"]
print(sys.argv[1], *(f"{k}={(b[k][1] - a[k][1]) / n[k] / g:.1f}" for k in b), f"clock_calls={reads:.2f}")
' "$r" "$PROBE_PREV" "$cur" >>"$T/probes.txt"
            PROBE_PREV=$cur
        fi
    done
done
python3 - "$T/results.txt" "$SERVER" <<'PY'
import collections, os, statistics, sys
d = collections.defaultdict(dict)
by = collections.defaultdict(lambda: collections.defaultdict(list))
calls = os.environ['CALLS'].split()
server = sys.argv[2]
cpu = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    r, v, ns, *per = line.split()
    d[v][int(r)] = float(ns)
    cpu[v][int(r)] = float(per[3])
    for c, x in zip(calls, per):
        by[v][c].append(float(x))
floor = statistics.median(d['floor'].values())
print(f"{'variant':8s} {'ns/request outside syscalls':>28s} {'minus the floor':>16s}  (min-max over rounds)")
for v in d:
    vals = list(d[v].values())
    m = statistics.median(vals)
    print(f"{v:8s} {m:28.0f} {m - floor:16.0f}  ({min(vals) - floor:.0f}-{max(vals) - floor:.0f})")
print("by call, median ns per request minus the floor's: " + "; ".join(
    f"{v} " + ", ".join(f"{c} {statistics.median(by[v][c]) - statistics.median(by['floor'][c]):.0f}"
                        for c in calls) for v in d if v != 'floor'))
if 'other' in d:
    diff = [d['other'][r] - d['agent'][r] for r in d['agent'] if r in d['other']]
    print(f"other - agent, paired by round: median {statistics.median(diff):+.0f} ns "
          f"({min(diff):+.0f} to {max(diff):+.0f})")
cfl = statistics.median(cpu['floor'].values())
print(f"{server}'s CPU per request in all (schedstat / wrk's requests: the agent's code and what it "
      f"costs {server} and the kernel around it), median over the rounds: " + "; ".join(
          f"{v} {statistics.median(cpu[v].values()) / 1000:.2f} us "
          f"({statistics.median(cpu[v].values()) / cfl:.3f}x the floor's)" for v in cpu))
if 'other' in cpu:
    diff = [cpu['other'][r] - cpu['agent'][r] for r in cpu['agent'] if r in cpu['other']]
    print(f"  other - agent, paired by round: median {statistics.median(diff):+.0f} ns "
          f"({min(diff):+.0f} to {max(diff):+.0f})")
PY
if [ "$BREAKDOWN" = 1 ]; then
    python3 - "$T/results.txt" "$T/probes.txt" <<'PY'
import collections, statistics, sys
tot = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    r, v, ns, *_ = line.split()
    tot[v][int(r)] = float(ns)
steps = collections.defaultdict(list)
for line in open(sys.argv[2]):
    r, *kv = line.split()
    for x in kv:
        k, v = x.split('=')
        steps[k].append(float(v))
med = {k: statistics.median(v) for k, v in steps.items()}
rng = {k: f"{min(v):.0f}-{max(v):.0f}" for k, v in steps.items()}
print("probed (bench/probes.c), median ns per call over the rounds (min-max), the timing's own "
      "rdtscp pair taken off; 'again': the same parse run at once a second time, warm:")
for k, label in (('req', 'request head parsed'), ('resp', 'response head parsed'),
                 ('start', 'entry span started'), ('finish', 'entry span ended, record written'),
                 ('put', '  of which the ring write'),
                 ('clock', 'a clock read of the connection layer')):
    again = f"; again, warm: {med[k + '_again']:.0f} ({rng[k + '_again']})" if k + '_again' in med else ''
    print(f"  {label:38s} {med[k]:6.0f} ({rng[k]}){again}")
steps4 = sum(med[k] for k in ('req', 'resp', 'start', 'finish')) + med['clock'] * med['clock_calls']
agent = statistics.median(tot['agent'].values()) - statistics.median(tot['floor'].values())
print(f"  ({med['clock_calls']:.1f} clock reads of the connection layer per request)")
print(f"  the four steps and the clock reads: {steps4:.0f} ns per request of the agent's {agent:.0f} "
      f"above the floor; the rest, {agent - steps4:.0f} ns: the connection layer (fd lookup, its "
      "lock, the request fifo, body counting), the interposed calls")
diff = [tot['probed'][r] - tot['agent'][r] for r in tot['agent'] if r in tot['probed']]
print(f"  the probes' own cost (probed - agent, paired by round; the warm runs included): "
      f"{statistics.median(diff):+.0f} ns ({min(diff):+.0f} to {max(diff):+.0f})")
PY
fi
