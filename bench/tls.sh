#!/usr/bin/env bash
# bench/tls.sh - HTTPS cost, counted (callgrind), not timed (issue 35).
#
#   bench/tls.sh [--lib=libswagent.so] [--base-lib=OLD/libswagent.so] [--n1=300 --n2=900]
#
# 1. nginx as a TLS server (one process: master_process off) under callgrind serving the
#    612-byte file N1 and then N2 times on one keep-alive connection (a Python http.client,
#    not measured), bare and traced (every request sampled); the same over plaintext. The
#    added instructions per traced request = (agent(N2) - agent(N1) - bare(N2) + bare(N1)) /
#    (N2 - N1), for HTTPS and for HTTP: the issue's target is HTTPS within 10 % of HTTP.
# 2. With --base-lib (the plaintext agent: the same tree built with the TLS names taken out of
#    agent/swagent.map, so that nothing of tls.c is interposed): processes that load libssl and
#    make no traced request, under each library: `python3 -c 'import ssl;
#    ssl.create_default_context()'` and `curl -s file:///dev/null` (libcurl loads and
#    initialises OpenSSL): total instructions; and TLS traffic the agent does not trace (a
#    Python client and server thread over a socketpair, 100 bytes each way per round trip):
#    instructions per round trip (UN1/UN2 round trips, like N1/N2).
#    PROTOS=none skips part 1.
# Writes "key value" lines to stdout (and $OUT/tls.txt when OUT is set); KEEP=1 keeps the
# callgrind files (bench/cg_diff.py on them names the functions). Loopback only.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH_TAG=bench-tls
. "$ROOT/bench/common.sh"
LIB=$ROOT/build/agent/libswagent.so
BASE_LIB=""
N1=300
N2=900
UN1=200
UN2=1000
for a in "$@"; do
    case $a in
    --lib=*) LIB=${a#*=} ;;
    --base-lib=*) BASE_LIB=${a#*=} ;;
    --n1=*) N1=${a#*=} ;;
    --n2=*) N2=${a#*=} ;;
    *) echo "usage: bench/tls.sh [--lib=SO] [--base-lib=SO] [--n1=N --n2=N]" >&2; exit 2 ;;
    esac
done
for tool in nginx valgrind callgrind_annotate openssl python3 curl; do
    command -v $tool >/dev/null || { echo "bench-tls: $tool missing (scripts/deps.sh)" >&2; exit 1; }
done
T=$(mktemp -d "${TMPDIR:-/tmp}/sw-bench-tls.XXXXXX")
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    if [ -n "${KEEP:-}" ]; then echo "bench-tls: kept $T" >&2; else rm -rf "$T"; fi
}
trap cleanup EXIT
log() { echo "bench-tls: $*" >&2; }
res() { echo "$1 $2"; [ -n "${OUT:-}" ] && echo "$1 $2" >>"$OUT/tls.txt"; return 0; }

# Certificates, content, agent config (the ring is drained by no reporter: a bench ring of
# 64 MiB holds every segment of the run).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
    -subj /CN=127.0.0.1 -keyout "$T/key.pem" -out "$T/cert.pem" 2>/dev/null
mkdir -p "$T/www" "$T/run" && chmod 700 "$T/run"
head -c 612 /dev/zero | tr '\0' 'x' >"$T/www/small.txt"
cat >"$T/agent.config" <<CONF
collector.backend_service=127.0.0.1:1
swagent.runtime_dir=$T/run
swagent.reporter_path=/bin/true
swagent.ring_bytes=67108864
agent.service_name=bench-tls
logging.dir=$T
CONF

# cg_nginx PROTO TAG N PRELOAD -> $T/ng.PROTO.TAG.N
cg_nginx() {
    local proto=$1 tag=$2 n=$3 pre=$4 d=$T/ng-$1-$2-$3 port extra=""
    port=$(free_port)
    mkdir -p "$d"
    if [ "$proto" = https ]; then
        # The plaintext server's port stays closed; the TLS one serves the same file.
        local tport
        tport=$(free_port)
        extra="server { listen 127.0.0.1:$tport ssl; ssl_certificate $T/cert.pem;
            ssl_certificate_key $T/key.pem; location / { root $T/www; } }"
        nginx_conf "$d" "$port" 64 1000000 1 "location / { root $T/www; }" "$extra"
        port=$tport
    else
        nginx_conf "$d" "$port" 64 1000000 1 "location / { root $T/www; }"
    fi
    env SW_AGENT_CONFIG="$T/agent.config" ${pre:+LD_PRELOAD=$pre} valgrind --tool=callgrind \
        --trace-children=no --callgrind-out-file="$T/ng.$proto.$tag.$n" \
        nginx -c "$d/nginx.conf" -p "$d" 2>"$d/valgrind.log" &
    local vp=$!
    PIDS+=($vp)
    # nginx under valgrind on a busy machine may take longer than wait_port's 10 s to listen.
    local i
    for i in 1 2 3 4 5 6; do wait_port "$port" 2>/dev/null && break; done
    [ "$i" -lt 6 ] || wait_port "$port"
    python3 - "$proto" "$port" "$n" <<'PY'
import http.client, ssl, sys
proto, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if proto == "https":
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx)
else:
    c = http.client.HTTPConnection("127.0.0.1", port)
for _ in range(n):
    c.request("GET", "/small.txt")
    r = c.getresponse()
    assert r.status == 200 and len(r.read()) == 612
PY
    for _ in $(seq 120); do
        kill -TERM $vp 2>/dev/null || break
        sleep 0.5
    done
    wait $vp || true
}
total() { callgrind_annotate --auto=no "$1" 2>/dev/null | awk '/PROGRAM TOTALS/{gsub(",", "", $1); print $1}'; }
# The same without nginx's own instructions (its executable's functions), which the agent does
# not run: they move by up to ~30,000 between runs of the same build (its cached time strings,
# made again each second a run lasts under valgrind), so the "_outside_nginx" figures repeat
# to within ~15 per request where the totals moved by up to ~100.
outside_nginx() {
    callgrind_annotate --auto=no --inclusive=no --threshold=100 "$1" 2>/dev/null | awk '
        /PROGRAM TOTALS/ { gsub(",", "", $1); t = $1 }
        /\[\/usr\/sbin\/nginx\]$/ { v = $1; gsub(",", "", v); n += v }
        END { print t - n }'
}

[ "${PROTOS:-}" = none ] && PROTOS=""  || PROTOS=${PROTOS:-http https}
for proto in $PROTOS; do
    for n in $N1 $N2; do
        log "nginx $proto: $n requests, bare and traced (callgrind)"
        cg_nginx $proto bare $n ""
        cg_nginx $proto agent $n "$LIB"
    done
    b=$(( ($(total "$T/ng.$proto.bare.$N2") - $(total "$T/ng.$proto.bare.$N1")) / (N2 - N1) ))
    a=$(( ($(total "$T/ng.$proto.agent.$N2") - $(total "$T/ng.$proto.agent.$N1")) / (N2 - N1) ))
    res "ir_ng_${proto}_bare" "$b"
    res "ir_ng_${proto}_agent" "$a"
    res "ir_ng_${proto}_added" "$((a - b))"
    b=$(( ($(outside_nginx "$T/ng.$proto.bare.$N2") - $(outside_nginx "$T/ng.$proto.bare.$N1")) / (N2 - N1) ))
    a=$(( ($(outside_nginx "$T/ng.$proto.agent.$N2") - $(outside_nginx "$T/ng.$proto.agent.$N1")) / (N2 - N1) ))
    res "ir_ng_${proto}_added_outside_nginx" "$((a - b))"
done
if [ -n "$PROTOS" ]; then
    segs=$(find "$T/run" -name 'ring-*' | wc -l)
    [ "$segs" -gt 0 ] || { log "no ring was written: nothing was traced"; exit 1; }
fi

if [ -n "$BASE_LIB" ]; then
    # TLS traffic the agent does not trace: a client and a server thread in one Python process
    # over a socketpair (a Unix-domain pair: no connection object, so each session is looked
    # at once and then passed), R round trips of 100 bytes each way, N1 and N2 of them.
    cat >"$T/untraced.py" <<'PY'
import socket, ssl, sys, threading
n, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
a, b = socket.socketpair()
sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
sctx.load_cert_chain(cert, key)
cctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
cctx.check_hostname = False
cctx.verify_mode = ssl.CERT_NONE
def serve():
    s = sctx.wrap_socket(b, server_side=True)
    for _ in range(n):
        d = b""
        while len(d) < 100:
            d += s.recv(100 - len(d))
        s.sendall(d)
t = threading.Thread(target=serve)
t.start()
c = cctx.wrap_socket(a)
for _ in range(n):
    c.sendall(b"x" * 100)
    d = b""
    while len(d) < 100:
        d += c.recv(100 - len(d))
t.join()
PY
    for v in base new; do
        l=$LIB
        [ $v = base ] && l=$BASE_LIB
        env PYTHONHASHSEED=0 SW_AGENT_CONFIG="$T/agent.config" LD_PRELOAD="$l" valgrind --tool=callgrind \
            --callgrind-out-file="$T/py.$v" /usr/bin/python3 -c 'import ssl; ssl.create_default_context()' \
            2>/dev/null
        env SW_AGENT_CONFIG="$T/agent.config" LD_PRELOAD="$l" valgrind --tool=callgrind \
            --callgrind-out-file="$T/curl.$v" curl -s file:///dev/null 2>/dev/null
        res "ir_python_ssl_$v" "$(total "$T/py.$v")"
        res "ir_curl_noreq_$v" "$(total "$T/curl.$v")"
        for n in $UN1 $UN2; do
            env PYTHONHASHSEED=0 SW_AGENT_CONFIG="$T/agent.config" LD_PRELOAD="$l" \
                valgrind --tool=callgrind --callgrind-out-file="$T/un.$v.$n" \
                /usr/bin/python3 "$T/untraced.py" "$n" "$T/cert.pem" "$T/key.pem" 2>/dev/null
        done
        res "ir_untraced_rt_$v" "$(( ($(total "$T/un.$v.$UN2") - $(total "$T/un.$v.$UN1")) / (UN2 - UN1) ))"
    done
fi
