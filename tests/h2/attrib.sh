#!/usr/bin/env bash
# attrib.sh - which request a gRPC exit belongs to (issue 37 item 5): a traced gRPC server A
# (greeter.py, grpc core) whose Relay method calls server B's SayHello while serving, over
# cleartext and over TLS, three calls each. Each call is one trace: the client's exit, A's
# entry (Relay) with its exit (SayHello) as child in the same segment, B's entry child of
# that exit. The handler runs on a pool thread while grpc core read the request on its
# poller thread; docs/http2.md, "Which request a gRPC call belongs to", says what makes this
# hold.
E2E_NAME=h2_attrib
. "$E2E_DIR/lib.sh"
. "$E2E_DIR/tls_lib.sh"
. "$H2_DIR/h2lib.sh"
need jq
need_grpc
e2e_init
start_stub
tls_certs
CA=$T/tls/ca.pem
start_greeter gb h2-b
B=$PORT
start_greeter gbt h2-bt --tls "$T/tls/srv.pem" "$T/tls/srv.key"
BT=$PORT
start_greeter ga h2-a --relay "127.0.0.1:$B"
A=$PORT
start_greeter gat h2-at --tls "$T/tls/srv.pem" "$T/tls/srv.key" --relay "127.0.0.1:$BT" --relay-ca "$CA"
AT=$PORT
T_START=$(now_ms)
out=$(greet h2-cli "127.0.0.1:$A" Relay --n 3) || fail "Relay (cleartext): $out"
[ "$out" = $'relayed hello world 0\nrelayed hello world 1\nrelayed hello world 2' ] || fail "Relay got: $out"
out=$(greet h2-clit "127.0.0.1:$AT" Relay --n 3 --tls "$CA") || fail "Relay (TLS): $out"
[ "$(echo "$out" | wc -l)" = 3 ] || fail "Relay (TLS) got: $out"

wait_segments 18
T_END=$(now_ms)
G=helloworld.Greeter
check 'length == 18' "expected exactly 18 segments"
check "$JQDEFS"' ([$s[].traceId] | unique | length) == 6' "one trace per call"
for m in ":h2-cli:h2-a:h2-b" "t:h2-clit:h2-at:h2-bt"; do
    IFS=: read -r sfx cli a b <<<"$m"
    check "$JQDEFS$H2DEFS"' all(seg("'$a'")[]; . as $v | ($v | .spans |= sort_by(.spanId)) as $n
        | ($n.spans | length) == 2
        and ($n.spans[0] | .spanType == "Entry" and grpc_span("'$G'.Relay"; "OK"))
        and ($n.spans[1] | .spanType == "Exit" and .parentSpanId == 0 and grpc_span("'$G'.SayHello"; "OK"))
        and ([seg("'$cli'")[] | select(.traceId == $v.traceId)] as $c | ($c | length) == 1
             and links($n; $c[0]; $c[0].spans[0]))
        and ([seg("'$b'")[] | select(.traceId == $v.traceId)] as $x | ($x | length) == 1
             and links($x[0]; $n; $n.spans[1])))' \
        "$a: the call made while serving is a child of the served request ($cli -> $a -> $b)"
done
echo "ok h2_attrib"
