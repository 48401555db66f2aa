#!/usr/bin/env bash
# basic.sh - curl (traced) -> python3 -m http.server (traced), checked field by field:
# exactly two segments per request, one trace id, the server's entry ref pointing at curl's exit
# span (segment id, span id, service, instance, endpoint, networkAddressUsedAtPeer byte-equal
# to the exit peer), span 0 root with parent -1, epoch-ms times inside the test's wall clock
# window, component 49, layer Http, url/http.method/http.status_code tags; a 404 is an error on
# both sides. Also: curl's HTTP status and body are unchanged.
E2E_NAME=basic
. "$E2E_DIR/lib.sh"
e2e_init
start_stub
mkdir "$T/www"
echo "hello e2e" >"$T/www/hello.txt"
start_server py traced e2e-python python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/www"
PY=$PORT PY_PID=$LAST_PID

body=$(traced e2e-curl curl -sS "http://127.0.0.1:$PY/hello.txt?x=1") || fail "curl failed"
[ "$body" = "hello e2e" ] || fail "body changed: $body"
code=$(traced e2e-curl curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PY/missing") || true
[ "$code" = 404 ] || fail "404 request answered $code"
wait_segments 4
T_END=$(now_ms)

check 'length == 4' "expected exactly 4 segments"
check "$JQDEFS"' (seg("e2e-curl") | length) == 2 and (seg("e2e-python") | length) == 2' \
    "two segments per service"
check "$JQDEFS"' ([$s[].traceId] | unique | length) == 2' "two traces (one per request)"
check "$JQDEFS"' all($s[]; root0 and (.spans | length) == 1 and (.isSizeLimited | not))' \
    "span 0 root with parent -1 in each single-span segment"
check "$JQDEFS"' all($s[].spans[]; sane_times)' "times in ms inside the test window, end >= start"
check "$JQDEFS"' all($s[]; .serviceInstance | test("^[0-9a-f]{32}@"))' "default instance names"
check "$JQDEFS"' ([$s[].traceSegmentId] | unique | length) == 4' "unique segment ids"
check "$JQDEFS"' all($s[].spans[]; .peer | length > 0)' "peers set"

# Per request: the exit (curl) and the entry (python) of the same trace.
for req in "GET:/hello.txt 200" "GET:/missing 404"; do
    set -- $req
    op=$1 st=$2
    check "$JQDEFS"' (seg("e2e-curl") | map(select(.spans[0].operationName == "'"$op"'"))) as $c
        | (seg("e2e-python") | map(select(.spans[0].operationName == "'"$op"'"))) as $p
        | ($c | length) == 1 and ($p | length) == 1
        and $c[0].traceId == $p[0].traceId
        and ($c[0].spans[0] | .spanType == "Exit" and http_span("'"$op"'"; "'"$st"'")
             and .peer == "127.0.0.1:'"$PY"'" and (.refs | length) == 0)
        and ($p[0].spans[0] | .spanType == "Entry" and http_span("'"$op"'"; "'"$st"'")
             and (.peer | test("^127\\.0\\.0\\.1:[0-9]+$")))
        and links($p[0]; $c[0]; $c[0].spans[0])' \
        "exit/entry pair of $op (status $st): fields and the ref"
done
check "$JQDEFS"' seg("e2e-python") | map(.spans[0]) | map(select(.operationName == "GET:/hello.txt"))[0]
    | tag("url") == "http://127.0.0.1:'"$PY"'/hello.txt?x=1"' "entry url tag keeps the query"
# The reporter runs with the defaults: SCHED_IDLE and nice 10 (or the test's own nice if higher).
REP_PID=$(reporter_pid)
[ -n "$REP_PID" ] && [ -d "/proc/$REP_PID" ] || fail "no running reporter found"
WANT=$(stat_nice /proc/self/stat)
[ "$WANT" -lt 10 ] && WANT=10
check_reporter_sched "$REP_PID" 5 "$WANT"
echo "ok basic"
