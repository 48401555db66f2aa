#!/usr/bin/env bash
# attrib.sh - which request a gRPC exit belongs to (issue 37 item 5): a traced gRPC server A
# (greeter.py, grpc core) whose Relay method calls server B's SayHello while serving, over
# cleartext and over TLS, 3 calls from each of two clients at once. Checked: every call is an
# exit of its client, A's entry is that exit's child, every call A makes while serving is an
# exit whose callee's (B's) entry is its child, and no exit is given a wrong parent: an exit
# that joined a served request lies within it (start to end) and in its trace. How many of
# A's exits join the request served is measured and printed (docs/http2.md, "Which request a
# gRPC call belongs to": grpc core reads the request on its poller thread and runs the handler
# on a pool thread, so the thread rule often finds no request).
E2E_NAME=h2_attrib
. "$E2E_DIR/lib.sh"
. "$E2E_DIR/tls_lib.sh"
. "$H2_DIR/h2lib.sh"
h2_setup
need_grpc
start_greeter gb h2-b
B=$PORT
start_greeter gbt h2-bt --tls "$T/tls/srv.pem" "$T/tls/srv.key"
BT=$PORT
start_greeter ga h2-a --relay "127.0.0.1:$B"
A=$PORT
start_greeter gat h2-at --tls "$T/tls/srv.pem" "$T/tls/srv.key" --relay "127.0.0.1:$BT" --relay-ca "$CA"
AT=$PORT
T_START=$(now_ms)
for i in 1 2; do
    greet h2-cli "127.0.0.1:$A" Relay --n 3 >"$T/cli$i.out" 2>&1 &
    PIDS="$PIDS $!"
    greet h2-clit "127.0.0.1:$AT" Relay --n 3 --tls "$CA" >"$T/clit$i.out" 2>&1 &
    PIDS="$PIDS $!"
done
wait_for "[ \$(cat '$T'/cli*.out | grep -c '^relayed hello world') = 12 ]" 60 ||
    fail "Relay calls: $(cat "$T"/cli*.out)"

# 12 client exits, 12 entries at A, 12 exits at A, 12 entries at B: 48 spans.
wait_for "[ \$(jq -s '[.[].spans[]] | length' '$T/seg.json') -ge 48 ]" 30 || fail "spans did not arrive"
sleep 1.5
T_END=$(now_ms)
G=helloworld.Greeter
check "$JQDEFS"' [$s[].spans[]] | length == 48' "48 spans"
check "$JQDEFS"' all($s[].spans[]; sane_times)' "times"
for m in "h2-cli:h2-a:h2-b" "h2-clit:h2-at:h2-bt"; do
    IFS=: read -r cli a b <<<"$m"
    check "$JQDEFS$H2DEFS"' [seg("'$cli'")[] | .spans | length == 1 and (.[0] | .spanType == "Exit"
        and grpc_span("'$G'.relay"; "OK"))] | length == 6 and all' "$cli: 6 relay exits"
    check "$JQDEFS$H2DEFS"' [seg("'$a'")[].spans[] | select(.spanType == "Entry")] | length == 6
        and all(grpc_span("'$G'.relay"; "OK"))' "$a: 6 relay entries"
    check "$JQDEFS$H2DEFS"' [seg("'$a'")[].spans[] | select(.spanType == "Exit")] | length == 6
        and all(grpc_span("'$G'.sayHello"; "OK"))' "$a: 6 sayHello exits"
    # A's entry: the child of its client's exit (the span 0 of the segment holding it).
    check "$JQDEFS"' all(seg("'$a'")[] | select(any(.spans[]; .spanType == "Entry")); . as $v
        | ($v | .spans |= sort_by(.spanId)) as $n
        | [seg("'$cli'")[] | select(.traceId == $v.traceId)] as $c
        | ($c | length) == 1 and links($n; $c[0]; $c[0].spans[0]))' "$a: every entry the child of its client's exit"
    # B's entry: the child of the exit A made for it, whichever segment holds that exit.
    check "$JQDEFS"' all(seg("'$b'")[]; . as $x | ($x.spans[0].refs[0].parentTraceSegmentId) as $p
        | [seg("'$a'")[] | select(.traceSegmentId == $p)] as $pa | ($pa | length) == 1
        | ($pa[0].spans | map(select(.spanType == "Exit"))) as $ex | ($ex | length) == 1
        and links($x; ($pa[0] | .spans |= sort_by(.spanId)); $ex[0]))' "$b: every entry the child of A's exit"
    # No wrong parent: an exit in a segment with an entry is that entry's child and lies within it.
    check "$JQDEFS"' all(seg("'$a'")[] | select((.spans | length) == 2); (.spans | sort_by(.spanId)) as $sp
        | $sp[0].spanType == "Entry" and $sp[1].spanType == "Exit" and $sp[1].parentSpanId == 0
        and ($sp[1].startTime | tonumber) >= ($sp[0].startTime | tonumber)
        and ($sp[1].endTime | tonumber) <= ($sp[0].endTime | tonumber))' "$a: a joined exit lies within its request"
    joined=$(jq -s '[.[] | select(.service == "'$a'" and (.spans | length) == 2)] | length' "$T/seg.json")
    echo "measured: $a: $joined of 6 calls made while serving joined the request served"
done
echo "ok h2_attrib"
