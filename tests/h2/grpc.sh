#!/usr/bin/env bash
# grpc.sh - gRPC with Debian's python3-grpcio (grpc core 1.51, system libssl3), client and
# server both traced, cleartext (prior knowledge) and TLS (ALPN h2): per mode two unary calls
# on one channel, a server-streaming call (3 replies) and a call the server aborts with
# NOT_FOUND. Each call is one trace of two segments: the client's exit and the server's entry,
# child of that exit; both named package.Service.method as SkyWalking's Java agent names them
# (helloworld.Greeter.sayHello), component gRPC (23), layer RPCFramework, tag rpc.status_code
# (OK, NOT_FOUND); the aborted call is an error on both sides. The replies are byte for byte those of the untraced run.
E2E_NAME=h2_grpc
. "$E2E_DIR/lib.sh"
. "$E2E_DIR/tls_lib.sh"
. "$H2_DIR/h2lib.sh"
h2_setup
need_grpc
start_greeter gsrv h2-gsrv
GP=$PORT
start_greeter gsrvt h2-gsrvt --tls "$T/tls/srv.pem" "$T/tls/srv.key"
GT=$PORT
start_greeter plain -
PLAIN=$PORT
T_START=$(now_ms)

# calls MODE SERVICE-SUFFIX TARGET [--tls CA]: the four calls, their output compared with an
# untraced client talking to the untraced server.
calls() {
    local m=$1 sfx=$2 target=$3
    shift 3
    for meth in "SayHello --n 2" SayHelloStream Fail; do
        # shellcheck disable=SC2086 # meth: the method and its options
        greet "h2-gcli$sfx" "$target" $meth "$@" >"$T/$m.$sfx.${meth%% *}.out" 2>"$T/$m.err" ||
            fail "$m $meth: client failed: $(cat "$T/$m.err")"
        # shellcheck disable=SC2086
        $PY3 "$H2_DIR/greeter.py" call "127.0.0.1:$PLAIN" $meth >"$T/$m.plain" 2>&1
        cmp -s "$T/$m.plain" "$T/$m.$sfx.${meth%% *}.out" ||
            fail "$m $meth: replies differ from untraced: $(cat "$T/$m.$sfx.${meth%% *}.out")"
    done
}
calls clear "" "127.0.0.1:$GP"
calls tls "t" "127.0.0.1:$GT" --tls "$CA"
grep -q "status NOT_FOUND" "$T/clear..Fail.out" || fail "Fail did not fail"
[ "$(cat "$T/clear..SayHelloStream.out" | wc -l)" = 3 ] || fail "streaming: not 3 replies"

# Per mode: 4 client exits (2 + 1 + 1), 4 server entries.
wait_segments 16
T_END=$(now_ms)
G=helloworld.Greeter
check 'length == 16' "expected exactly 16 segments"
check "$JQDEFS"' all($s[]; root0) and all($s[].spans[]; sane_times)' "roots and times"
check "$JQDEFS"' [seg("h2-gcli"), seg("h2-gsrv"), seg("h2-gclit"), seg("h2-gsrvt")]
    | map(length) == [4, 4, 4, 4]' "four segments per service"
check "$JQDEFS"' ([$s[].traceId] | unique | length) == 8' "one trace per call"
for sfx in "" t; do
    if [ -z "$sfx" ]; then peer=127.0.0.1:$GP; else peer=127.0.0.1:$GT; fi
    check "$JQDEFS$H2DEFS"' [seg("h2-gcli'$sfx'")[].spans | length == 1 and (.[0] | .spanType == "Exit"
        and .peer == "'"$peer"'")] | all' "client$sfx: one exit each, peer (the :authority)"
    check "$JQDEFS$H2DEFS"' [seg("h2-gcli'$sfx'")[].spans[0] | [.operationName, tag("rpc.status_code"), .isError]]
        | sort == [["'$G'.fail", "NOT_FOUND", true], ["'$G'.sayHello", "OK", false],
                   ["'$G'.sayHello", "OK", false], ["'$G'.sayHelloStream", "OK", false]]' \
        "client$sfx: names, status codes, the aborted call an error"
    check "$JQDEFS$H2DEFS"' all(seg("h2-gcli'$sfx'")[].spans[0]; grpc_span(.operationName; tag("rpc.status_code")))' \
        "client$sfx: component 23, layer RPCFramework"
    check "$JQDEFS$H2DEFS"' all(seg("h2-gsrv'$sfx'")[]; .spans | length == 1 and (.[0] | .spanType == "Entry"
        and grpc_span(.operationName; tag("rpc.status_code"))))' "server$sfx: one gRPC entry each"
    check "$JQDEFS$H2DEFS"' all(seg("h2-gsrv'$sfx'")[]; . as $v
        | [seg("h2-gcli'$sfx'")[] | select(.traceId == $v.traceId)] as $c
        | ($c | length) == 1 and links($v; $c[0]; $c[0].spans[0])
        and $v.spans[0].operationName == $c[0].spans[0].operationName
        and ($v.spans[0] | tag("rpc.status_code")) == ($c[0].spans[0] | tag("rpc.status_code")))' \
        "server$sfx: every entry is the child of its client exit (same name and status)"
    # A stream ends when its last frame does: the server entry of the streaming call ends
    # before the client exit does (the trailers go out before they are read).
    check "$JQDEFS$H2DEFS"' [seg("h2-gsrv'$sfx'")[] | select(.spans[0].operationName == "'$G'.sayHelloStream")
        | . as $v | [seg("h2-gcli'$sfx'")[] | select(.traceId == $v.traceId)][0] as $c
        | ($v.spans[0].endTime | tonumber) <= ($c.spans[0].endTime | tonumber)
        and ($v.spans[0].startTime | tonumber) >= ($c.spans[0].startTime | tonumber)] == [true]' \
        "server$sfx: the streaming entry lies within its client exit"
done
echo "ok h2_grpc"
