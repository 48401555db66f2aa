#!/usr/bin/env bash
# bytewise.sh - the awkward writers of tests/preload/http_client.c (traced), against the traced
# echo server of tests/preload/echo_server.py, with the collector in the loop:
#   bytewise  - 5 requests, each head written 1, 2, 3, 5 bytes or all at a time on a
#               NON-BLOCKING socket (write and send alternately);
#   keepalive - 5 requests on one connection, heads in chunks of 0..4 bytes.
# The client itself checks that exactly one well-formed sw8 line reached the server and that
# the rest of each head is byte-identical; here the collector shows that every inserted sw8
# decodes into a ref joining the server's entry to the client's exit (10 joined pairs).
E2E_NAME=bytewise
. "$E2E_DIR/lib.sh"
[ -x "${HTTP_CLIENT:-}" ] || { echo "FAIL: HTTP_CLIENT (preload_http_client) not set" >&2; exit 1; }
e2e_init
start_stub
start_server echo traced e2e-echo python3 -u "$PRELOAD_DIR/echo_server.py" http 120
ECHO=$PORT
traced e2e-bytewise "$HTTP_CLIENT" "$ECHO" bytewise >"$T/client.out" 2>&1 || fail "bytewise client: $(cat "$T/client.out")"
traced e2e-bytewise "$HTTP_CLIENT" "$ECHO" keepalive >>"$T/client.out" 2>&1 || fail "keepalive client: $(cat "$T/client.out")"
wait_segments 20
T_END=$(now_ms)
check 'length == 20' "10 exits + 10 entries"
check "$JQDEFS"' (seg("e2e-bytewise") | length) == 10 and (seg("e2e-echo") | length) == 10
    and all($s[]; root0 and (.spans | length) == 1 and (.spans[0] | sane_times))' "segments per side"
check "$JQDEFS"' ([seg("e2e-echo")[].spans[0].operationName] | group_by(.) | map([.[0], length]))
        == [["GET:/bytewise", 5], ["GET:/ka/even", 3], ["GET:/ka/odd", 2]]' "entry operation names"
check "$JQDEFS"' all(seg("e2e-echo")[]; . as $p
    | (seg("e2e-bytewise") | map(select(.traceSegmentId == $p.spans[0].refs[0].parentTraceSegmentId)))
    | length == 1 and (.[0] as $c | links($p; $c; $c.spans[0])
        and $c.spans[0].operationName == $p.spans[0].operationName))' \
    "every entry joined to its exit through the inserted sw8"
echo "ok bytewise"
