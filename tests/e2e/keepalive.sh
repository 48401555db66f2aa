#!/usr/bin/env bash
# keepalive.sh - several requests on one connection, each with its own entry span:
#  1. keep-alive: `curl URL1 URL2 URL3` (traced) on one connection to a traced
#     `python3 -m http.server -p HTTP/1.1`: three exit segments and three entry segments, each
#     pair joined, right operation names and status codes (200, 200, 404: python's
#     http.server closes the connection after an error, so the 404 comes last), all entries with
#     the same client peer (one connection), timings ordered (start <= end <= next start).
#  2. pipelining: a traced python client sends three requests in ONE write; the agent inserts
#     an sw8 into each; the server answers all three (200, 200, 404) and its three entry spans
#     each join the matching exit span of the client.
E2E_NAME=keepalive
. "$E2E_DIR/lib.sh"
e2e_init
start_stub
mkdir "$T/www"
echo "alpha" >"$T/www/a.txt"
echo "bravo" >"$T/www/b.txt"
start_server py traced e2e-python python3 -u -m http.server -p HTTP/1.1 0 --bind 127.0.0.1 \
    --directory "$T/www"
PY=$PORT

# ---- 1. keep-alive with curl ----
traced e2e-curl curl -sS -o "$T/r1" -o "$T/r2" -o "$T/r3" -w '%{http_code} %{num_connects}\n' \
    "http://127.0.0.1:$PY/a.txt" "http://127.0.0.1:$PY/b.txt" "http://127.0.0.1:$PY/nope.txt" \
    >"$T/curl.out" || fail "curl failed"
[ "$(tr '\n' ' ' <"$T/curl.out")" = "200 1 200 0 404 0 " ] ||
    fail "curl statuses / connection reuse: $(cat "$T/curl.out")"
[ "$(cat "$T/r1")" = alpha ] && [ "$(cat "$T/r2")" = bravo ] || fail "keep-alive bodies changed"
wait_segments 6
T_END=$(now_ms)
check 'length == 6' "keep-alive: exactly 6 segments"
check "$JQDEFS"' (seg("e2e-python") | map(.spans[0]) | sort_by(.startTime | tonumber)) as $e
    | ($e | map(.operationName)) == ["GET:/a.txt", "GET:/b.txt", "GET:/nope.txt"]
    and ($e | map(tag("http.status_code"))) == ["200", "200", "404"]
    and ($e | map(.isError)) == [false, false, true]
    and ($e | map(.peer) | unique | length) == 1
    and all($e[]; .spanType == "Entry" and sane_times)
    and ($e[0].endTime | tonumber) <= ($e[1].startTime | tonumber)
    and ($e[1].endTime | tonumber) <= ($e[2].startTime | tonumber)' \
    "keep-alive: entry spans in order with right names, statuses, one peer, ordered times"
check "$JQDEFS"' all(seg("e2e-python")[]; . as $p
    | (seg("e2e-curl") | map(select(.traceSegmentId == $p.spans[0].refs[0].parentTraceSegmentId)))
    | length == 1 and (.[0] as $c | links($p; $c; $c.spans[0])
        and $c.spans[0].operationName == $p.spans[0].operationName
        and ($c.spans[0] | tag("http.status_code")) == ($p.spans[0] | tag("http.status_code"))))' \
    "keep-alive: each entry joins its exit"
check "$JQDEFS"' (seg("e2e-curl") | map(.spans[0]) | sort_by(.startTime | tonumber)) as $x
    | ($x | map(.operationName)) == ["GET:/a.txt", "GET:/b.txt", "GET:/nope.txt"]
    and all($x[]; .spanType == "Exit" and sane_times and .peer == "127.0.0.1:'"$PY"'")
    and ($x[0].endTime | tonumber) <= ($x[1].startTime | tonumber)
    and ($x[1].endTime | tonumber) <= ($x[2].startTime | tonumber)' \
    "keep-alive: exit spans in order"

# ---- 2. pipelined requests in one write ----
SEG_FROM=$(lines "$T/seg.json")
T_START=$(now_ms)
unset T_END
printf 'GET /a.txt HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n\r\nGET /b.txt?q=1 HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n\r\nGET /nope.txt HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nConnection: close\r\n\r\n' \
    "$PY" "$PY" "$PY" >"$T/pipe.req"
traced e2e-pipe python3 "$E2E_DIR/rawclient.py" "$PY" "$T/pipe.req" >"$T/pipe.resp" ||
    fail "pipelining client failed"
[ "$(grep -a -c '^HTTP/1' "$T/pipe.resp")" = 3 ] || fail "not 3 responses: $(cat "$T/pipe.resp")"
[ "$(grep -a '^HTTP/1' "$T/pipe.resp" | cut -d' ' -f2 | tr '\n' ' ')" = "200 200 404 " ] ||
    fail "pipelined statuses: $(grep -a '^HTTP/1' "$T/pipe.resp")"
grep -a -q '^alpha' "$T/pipe.resp" && grep -a -q '^bravo' "$T/pipe.resp" || fail "pipelined bodies"
wait_segments 6
T_END=$(now_ms)
check 'length == 6' "pipeline: exactly 6 segments"
check "$JQDEFS"' (seg("e2e-python") | map(.spans[0]) | sort_by(.startTime | tonumber)) as $e
    | ($e | map(.operationName)) == ["GET:/a.txt", "GET:/b.txt", "GET:/nope.txt"]
    and ($e | map(tag("http.status_code"))) == ["200", "200", "404"]
    and ($e | map(.isError)) == [false, false, true]
    and all($e[]; .spanType == "Entry" and sane_times)
    and ($e[0].endTime | tonumber) <= ($e[1].endTime | tonumber)
    and ($e[1].endTime | tonumber) <= ($e[2].endTime | tonumber)' \
    "pipeline: one entry span per request, right names, statuses and order"
check "$JQDEFS"' all(seg("e2e-python")[]; . as $p
    | (seg("e2e-pipe") | map(select(.traceSegmentId == $p.spans[0].refs[0].parentTraceSegmentId)))
    | length == 1 and (.[0] as $c | links($p; $c; $c.spans[0])
        and $c.spans[0].spanType == "Exit"
        and $c.spans[0].operationName == $p.spans[0].operationName
        and ($c.spans[0] | tag("http.status_code")) == ($p.spans[0] | tag("http.status_code"))))' \
    "pipeline: each entry joins the client's exit span of the same request"
echo "ok keepalive"
