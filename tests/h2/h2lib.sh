# h2lib.sh - helpers of the HTTP/2 and gRPC tests (tests/h2/; sourced after tests/e2e/lib.sh
# and tls_lib.sh, whose temp dir $T, PIDS, EXIT trap and certificates they use). Every
# program is Debian's (scripts/deps.sh installs them); one that is missing fails the test.

PY3=/usr/bin/python3 # Debian's python3, the one python3-grpcio is built for

# need PROGRAM... and wait_port PORT SECONDS: tests/db/dblib.sh's.
. "$E2E_DIR/../db/dblib.sh"

need_grpc() {
    $PY3 -c 'import grpc' 2>/dev/null || fail "python3-grpcio is not installed (scripts/deps.sh)"
}

# h2_setup PROGRAM...: the test's start: the programs needed (jq and these), temp dir,
# collector-stub, certificates (CA: the test CA's file).
h2_setup() {
    e2e_init
    need jq "$@"
    start_stub
    tls_certs
    CA=$T/tls/ca.pem
}

# start_greeter NAME SERVICE [ARGS...]: tests/h2/greeter.py serve traced as SERVICE
# (SERVICE "-" runs it untraced); sets PORT and LAST_PID.
start_greeter() {
    local name=$1 svc=$2
    shift 2
    if [ "$svc" = - ]; then
        start_server "$name" $PY3 -u "$H2_DIR/greeter.py" serve "$@"
    else
        start_server "$name" traced "$svc" $PY3 -u "$H2_DIR/greeter.py" serve "$@"
    fi
}

# greet SERVICE TARGET METHOD [ARGS...]: one greeter.py call traced as SERVICE; its output on
# stdout.
greet() {
    local svc=$1
    shift
    traced "$svc" $PY3 "$H2_DIR/greeter.py" call "$@"
}

# start_nghttpd SERVICE [--no-tls]: nghttpd traced as SERVICE serving $T/www on a free port
# (TLS with the test's certificate unless --no-tls); sets NGHTTPD (its port).
start_nghttpd() {
    local svc=$1 port
    shift
    port=$(free_port)
    mkdir -p "$T/www"
    if [ "${1:-}" = --no-tls ]; then
        env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME="$svc" nghttpd -a 127.0.0.1 -d "$T/www" \
            --no-tls "$port" >"$T/nghttpd-$port.out" 2>&1 &
    else
        env LD_PRELOAD="$SWAGENT_LIB" SW_AGENT_NAME="$svc" nghttpd -a 127.0.0.1 -d "$T/www" \
            "$port" "$T/tls/srv.key" "$T/tls/srv.pem" >"$T/nghttpd-$port.out" 2>&1 &
    fi
    PIDS="$PIDS $!"
    wait_port "$port" 10 || fail "nghttpd did not start"
    NGHTTPD=$port
}

# Extra jq definitions of the gRPC checks: SkyWalking's Java agent's names (the method's first
# letter in lower case: helloworld.Greeter.sayHello), rpc.status_code the status code's name
# (OK, NOT_FOUND), as its gRPC plugin writes status.getCode().name().
H2DEFS='
def grpc_span(op; code): .spanLayer == "RPCFramework" and .componentId == 23
    and .operationName == op and tag("rpc.status_code") == code
    and .isError == (code != "OK");
def h2_http(op; status): .spanLayer == "Http" and .operationName == op
    and tag("http.status_code") == status;
'
