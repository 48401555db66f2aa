#!/usr/bin/env bash
# bench/h2.sh - HTTP/2 pairs under h2load (nghttp2-client; issue 37): nghttpd serving a
# 612-byte file, bare and traced (every stream sampled, the reporter sending to a discarding
# collector-stub), both AT THE SAME TIME, each side (its nghttpd and its h2load) pinned to one
# core, the cores swapped every repetition; over cleartext (prior knowledge) and over TLS
# (ALPN h2). h2load -c 4 -m 10 --rps=1000: 4 connections, 10 concurrent streams each, 4,000
# requests/s per side (paced: every request traced, the reporter keeps up, none shed; both
# sides serve the same rate, so the cost shows in the latency and the CPU time per request).
#
#   bench/h2.sh [--lib=libswagent.so] [--reps=6] [--dur=2] [--rps=1000] [--build=DIR]
#
# Writes $OUT/pair_h2_clear.txt and $OUT/pair_h2_tls.txt in bench/run.sh's pair format
# (rep side core requests rps p50 p90 p99 p999 errors cpu_ticks cpu_ns; side a bare, b
# traced; latencies in µs; h2load gives the mean and the max of the request times, not
# percentiles: the p50 column holds the mean, the others the max) and "key value" lines to stdout (and $OUT/h2.txt
# when OUT is set): the medians of the traced/bare ratios of req/s and of mean latency, the
# server's CPU time per request on each side (schedstat), each ratio with its 90 % interval
# (bench/stats.py median_ci). Short runs; loopback only.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH_TAG=bench-h2
. "$ROOT/bench/common.sh"
BUILD=$ROOT/build
LIB=""
REPS=6
DUR=2
RPS=1000
for a in "$@"; do
    case $a in
    --lib=*) LIB=${a#*=} ;;
    --reps=*) REPS=${a#*=} ;;
    --dur=*) DUR=${a#*=} ;;
    --rps=*) RPS=${a#*=} ;;
    --build=*) BUILD=${a#*=} ;;
    *) echo "usage: bench/h2.sh [--lib=SO] [--reps=N] [--dur=S] [--rps=N] [--build=DIR]" >&2; exit 2 ;;
    esac
done
LIB=${LIB:-$BUILD/agent/libswagent.so}
for tool in nghttpd h2load openssl taskset python3; do
    command -v $tool >/dev/null || { echo "bench-h2: $tool missing (scripts/deps.sh)" >&2; exit 1; }
done
T=$(mktemp -d "${TMPDIR:-/tmp}/sw-bench-h2.XXXXXX")
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for f in "$T"/swagent-reporter*.log "$T"/run/swagent-reporter*.log; do
        [ -f "$f" ] || continue
        for p in $(sed -n 's/.*reporter [0-9.]* started: pid \([0-9]*\),.*/\1/p' "$f"); do
            kill "$p" 2>/dev/null || true
        done
    done
    if [ -n "${KEEP:-}" ]; then echo "bench-h2: kept $T" >&2; else rm -rf "$T"; fi
}
trap cleanup EXIT
log() { echo "bench-h2: $*" >&2; }
res() { echo "$1 $2"; [ -n "${OUT:-}" ] && echo "$1 $2" >>"$OUT/h2.txt"; return 0; }
DATA=${OUT:-$T}

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
    -subj /CN=127.0.0.1 -keyout "$T/key.pem" -out "$T/cert.pem" 2>/dev/null
mkdir -p "$T/www" && mkdir -m 700 "$T/run"
head -c 612 /dev/zero | tr '\0' 'x' >"$T/www/small.txt"
"$BUILD/collector-stub/collector-stub" --listen 127.0.0.1:0 --port-file "$T/stub.port" \
    --segments /dev/null --discard 2>"$T/stub.log" &
PIDS+=($!)
wait_file "$T/stub.port"
cat >"$T/agent.config" <<CONF
collector.backend_service=127.0.0.1:$(cat "$T/stub.port")
swagent.runtime_dir=$T/run
swagent.reporter_path=$BUILD/agent/swagent-reporter
agent.service_name=bench-h2
logging.dir=$T
CONF

# start_side TAG PRELOAD TLS -> the port of an nghttpd (pid appended to PIDS, name in $T/TAG.pid)
start_side() {
    local tag=$1 pre=$2 tls=$3 port
    port=$(free_port)
    if [ "$tls" = 1 ]; then
        env SW_AGENT_CONFIG="$T/agent.config" ${pre:+LD_PRELOAD=$pre} nghttpd -a 127.0.0.1 \
            -d "$T/www" "$port" "$T/key.pem" "$T/cert.pem" >/dev/null 2>&1 &
    else
        env SW_AGENT_CONFIG="$T/agent.config" ${pre:+LD_PRELOAD=$pre} nghttpd -a 127.0.0.1 \
            -d "$T/www" --no-tls "$port" >/dev/null 2>&1 &
    fi
    PIDS+=($!)
    echo $! >"$T/$tag.pid"
    wait_port "$port" >&2
    echo "$port"
}

# one_run URL CORE OUT: h2load on CORE for DUR seconds -> OUT
one_run() {
    taskset -c "$2" h2load -c 4 -m 10 --rps="$RPS" -D "$DUR" --warm-up-time=1 "$1" >"$3" 2>&1 || true
}

# h2load's "requests: N total, ..., N succeeded, N failed, N errored", "finished in Xs, R req/s"
# and "time for request: min max mean sd": the pair line's columns.
parse() { # FILE -> "requests rps mean max errors"
    python3 - "$1" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
def us(v, u):
    return float(v) * {"us": 1.0, "ms": 1e3, "s": 1e6}[u]
m = re.search(r"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored", t)
r = re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", t)
q = re.search(r"time for request:\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)", t)
if not (m and r and q):
    print("0 0 0 0 1")
else:
    print(m.group(3), r.group(1), "%.0f" % us(q.group(5), q.group(6)), "%.0f" % us(q.group(3), q.group(4)),
          int(m.group(4)) + int(m.group(5)))
PY
}

for mode in clear tls; do
    tls=0 scheme=http
    [ $mode = tls ] && tls=1 scheme=https
    pa=$(start_side "bare-$mode" "" $tls)
    pb=$(start_side "traced-$mode" "$LIB" $tls)
    pid_a=$(cat "$T/bare-$mode.pid") pid_b=$(cat "$T/traced-$mode.pid")
    # warm-up (the traced side starts its reporter)
    h2load -n 2000 -c 4 -m 10 "$scheme://127.0.0.1:$pa/small.txt" >/dev/null 2>&1 || true
    h2load -n 2000 -c 4 -m 10 "$scheme://127.0.0.1:$pb/small.txt" >/dev/null 2>&1 || true
    : >"$DATA/pair_h2_$mode.txt"
    log "$mode: $REPS x ${DUR}s, h2load -c 4 -m 10 --rps=$RPS, bare and traced at the same time"
    for rep in $(seq 1 "$REPS"); do
        ca=$(((rep + 1) % 2)) cb=$((rep % 2))
        taskset -pc "$ca" "$pid_a" >/dev/null
        taskset -pc "$cb" "$pid_b" >/dev/null
        na=$(cpu_ns "$pid_a") nb=$(cpu_ns "$pid_b")
        one_run "$scheme://127.0.0.1:$pa/small.txt" "$ca" "$T/h2load.a" &
        w1=$!
        one_run "$scheme://127.0.0.1:$pb/small.txt" "$cb" "$T/h2load.b" &
        w2=$!
        wait $w1 $w2
        na=$(($(cpu_ns "$pid_a") - na)) nb=$(($(cpu_ns "$pid_b") - nb))
        for side in a b; do
            read -r req rps mean max err <<<"$(parse "$T/h2load.$side")"
            core=$ca ns=$na
            [ $side = b ] && core=$cb ns=$nb
            # paced: the CPU time of the 1 s warm-up is taken out in proportion
            ns=$((ns * DUR / (DUR + 1)))
            echo "$rep $side $core $req $rps $mean $max $max $max $err 0 $ns" >>"$DATA/pair_h2_$mode.txt"
        done
    done
    python3 - "$DATA/pair_h2_$mode.txt" "$mode" "$ROOT/bench" <<'PY' | while read -r k v; do res "$k" "$v"; done
import statistics, sys
sys.path.insert(0, sys.argv[3])
from stats import median_ci
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault(f[0], {})[f[1]] = (float(f[4]), float(f[5]), int(f[9]), float(f[11]) / max(1, int(f[3])))
reps = [r for r in rows.values() if "a" in r and "b" in r and r["a"][0] > 0 and r["b"][0] > 0]
m = sys.argv[2]
if reps:
    rs = [r["b"][0] / r["a"][0] for r in reps]
    lo, hi = median_ci(rs)
    print(f"h2_{m}_reps {len(reps)}")
    print(f"h2_{m}_rps_bare {statistics.median(r['a'][0] for r in reps):.0f}")
    print(f"h2_{m}_rps_traced {statistics.median(r['b'][0] for r in reps):.0f}")
    print(f"h2_{m}_rps_ratio {statistics.median(rs):.3f}")
    print(f"h2_{m}_rps_ratio_ci {lo:.3f}-{hi:.3f}")
    ls = [r["b"][1] / r["a"][1] for r in reps]
    lo, hi = median_ci(ls)
    print(f"h2_{m}_mean_latency_ratio {statistics.median(ls):.3f}")
    print(f"h2_{m}_mean_latency_ratio_ci {lo:.3f}-{hi:.3f}")
    # the server's CPU time per request (ns): the repetition's, its warm-up's share taken out
    ca, cb = [r["a"][3] for r in reps], [r["b"][3] for r in reps]
    print(f"h2_{m}_cpu_ns_req_bare {statistics.median(ca):.0f}")
    print(f"h2_{m}_cpu_ns_req_traced {statistics.median(cb):.0f}")
    ds = [b - a for a, b in zip(ca, cb)]
    lo, hi = median_ci(ds)
    print(f"h2_{m}_cpu_ns_req_added {statistics.median(ds):.0f}")
    print(f"h2_{m}_cpu_ns_req_added_ci {lo:.0f}-{hi:.0f}")
    print(f"h2_{m}_errors {sum(r['a'][2] + r['b'][2] for r in reps)}")
else:
    print(f"h2_{m}_reps 0")
PY
    kill "$pid_a" "$pid_b" 2>/dev/null || true
done
segs=$(find "$T/run" -name 'ring-*' | wc -l)
[ "$segs" -gt 0 ] || { log "no ring was written: nothing was traced"; exit 1; }
