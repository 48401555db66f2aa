#!/usr/bin/env bash
# h2_smoke.sh - HTTP/2 prior knowledge (agent/proto_h2.c): nghttp (traced) -> nghttpd --no-tls
# (traced), 100 requests as concurrent streams (nghttp -m 100) on one connection plus a 404: every stream an exit
# span of nghttp and an entry span of nghttpd, each entry in its exit's trace with a ref to it
# (the sw8 the module inserted into the HEADERS); names GET:/path, statuses, errors. nghttp's
# output (the bodies) unchanged. Then bench/h2_pair.c's gRPC-like calls, traced both sides:
# names, component 23, layer RPCFramework, rpc.status_code (the code's name, as SkyWalking's Java
# agent writes it), a failing status an error. The
# real-program HTTP/2 and gRPC tests (python3-grpcio, curl, nginx) are h2e2e's.
E2E_NAME=h2_smoke
. "$E2E_DIR/lib.sh"
e2e_init
command -v nghttpd >/dev/null && command -v nghttp >/dev/null ||
    fail "nghttp2-server / nghttp2-client are not installed (scripts/deps.sh)"
start_stub
mkdir "$T/www"
echo "hello h2" >"$T/www/hello.txt"
P=$(free_port)
traced e2e-nghttpd nghttpd --no-tls -d "$T/www" "$P" >"$T/nghttpd.out" 2>&1 &
PIDS="$PIDS $!"
wait_for "curl -s --http2-prior-knowledge -o /dev/null http://127.0.0.1:$P/" 10 ||
    fail "nghttpd did not start"
wait_segments 1 # the probe's entry (GET:/ 404)
SEG_FROM=$(lines "$T/seg.json")
body=$(traced e2e-nghttp nghttp -m 100 "http://127.0.0.1:$P/hello.txt") || fail "nghttp failed"
[ "$(echo "$body" | grep -c '^hello h2$')" = 100 ] && [ "$(echo "$body" | wc -l)" = 100 ] ||
    fail "bodies changed: $body"
traced e2e-nghttp nghttp "http://127.0.0.1:$P/missing" >/dev/null 2>&1 || true
wait_segments 202
T_END=$(now_ms)
check 'length == 202' "exactly 202 segments"
check "$JQDEFS"' (seg("e2e-nghttp") | length) == 101 and (seg("e2e-nghttpd") | length) == 101' \
    "101 exits and 101 entries"
check "$JQDEFS"' all($s[].spans[]; sane_times)' "times inside the test window"
check "$JQDEFS"' [seg("e2e-nghttp")[] | .spans[0] | select(http_span("GET:/hello.txt"; "200"))
    | select(.spanType == "Exit")] | length == 100' "100 exits GET:/hello.txt 200"
check "$JQDEFS"' [seg("e2e-nghttpd")[] | .spans[0] | select(http_span("GET:/hello.txt"; "200"))
    | select(.spanType == "Entry")] | length == 100' "100 entries GET:/hello.txt 200"
check "$JQDEFS"' [seg("e2e-nghttpd")[] | .spans[0] | select(http_span("GET:/missing"; "404"))]
    | length == 1' "the 404 entry, an error"
check "$JQDEFS"' ([$s[].traceId] | unique | length) == 101' "101 traces"
check "$JQDEFS"' all(seg("e2e-nghttpd")[]; . as $p
    | [seg("e2e-nghttp")[] | select(.traceId == $p.traceId)] as $c
    | ($c | length) == 1 and links($p; $c[0]; $c[0].spans[0]))' \
    "every entry a child of its own exit (ref: segment, span, peer)"
# gRPC-like unary calls (bench/h2_pair.c): SkyWalking's gRPC names, component, layer, status
SEG_FROM=$(lines "$T/seg.json")
T_START=$(now_ms)
start_server grpc traced e2e-grpc-srv "$H2_PAIR" server 3
traced e2e-grpc-cli "$H2_PAIR" client "$PORT" 3 || fail "h2_pair client failed"
export H2_PAIR_FAIL=1
start_server grpcf traced e2e-grpc-srv "$H2_PAIR" server 2
traced e2e-grpc-cli "$H2_PAIR" client "$PORT" 2 || fail "h2_pair client (failing calls) failed"
unset H2_PAIR_FAIL
wait_segments 10
T_END=$(now_ms)
check 'length == 10' "exactly 10 segments of the gRPC calls"
check "$JQDEFS"' def rpc(st): .operationName == "helloworld.Greeter.sayHello"
        and .componentId == 23 and .spanLayer == "RPCFramework" and tag("rpc.status_code") == st
        and .isError == (st != "OK");
    [seg("e2e-grpc-cli")[] | .spans[0] | select(.spanType == "Exit" and rpc("OK"))] | length == 3
    and ([seg("e2e-grpc-srv")[] | .spans[0] | select(.spanType == "Entry" and rpc("OK"))] | length == 3)
    and ([seg("e2e-grpc-cli")[] | .spans[0] | select(.spanType == "Exit" and rpc("NOT_FOUND"))] | length == 2)
    and ([seg("e2e-grpc-srv")[] | .spans[0] | select(.spanType == "Entry" and rpc("NOT_FOUND"))] | length == 2)' \
    "gRPC exits and entries: name, component 23, layer RPCFramework, rpc.status_code, errors"
check "$JQDEFS"' all(seg("e2e-grpc-srv")[]; . as $p
    | [seg("e2e-grpc-cli")[] | select(.traceId == $p.traceId)] as $c
    | ($c | length) == 1 and links($p; $c[0]; $c[0].spans[0]))' \
    "every gRPC entry a child of its own exit"
echo "ok h2_smoke"
