#!/usr/bin/env bash
# sw8_malformed.sh - malformed incoming sw8 headers of many kinds (empty, 7 and 9 fields, bad
# base64, base64url, unpadded, negative or non-numeric span id, empty fields, 4 KiB of garbage,
# bytes 0x80-0xff, control bytes, dashes only) sent to a traced python3 -m http.server: every request is answered
# normally (200, same body), and each makes an entry segment of a NEW trace with no refs.
# (Exception: control bytes make the request invalid HTTP; it is answered normally but not
# traced, see below.) A well-formed sw8 sent the same way (the control) does get a ref with the decoded fields.
E2E_NAME=sw8_malformed
. "$E2E_DIR/lib.sh"
e2e_init
start_stub
mkdir "$T/www"
printf 'the same body every time\n' >"$T/www/hello.txt"
start_server py traced e2e-python python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/www"
PY=$PORT
python3 "$E2E_DIR/sw8_cases.py" "$PY" "$T/www/hello.txt" >"$T/cases.out" || fail "a request was not answered normally"
n=$(lines "$T/cases.out")
[ "$n" -ge 13 ] || fail "only $n cases ran"
# binary_ctl: control bytes are not allowed in a field value, so the agent's HTTP parser
# (agent/http.c) gives up on that connection: the request is still answered normally (checked
# above), but it is not traced. Every other request makes exactly one segment.
wait_segments $((n - 1))
T_END=$(now_ms)
check "length == $((n - 1))" "one segment per request (binary_ctl untraced)"
check "$JQDEFS"' [$s[] | select(.spans[0] | tag("url") | endswith("?case=binary_ctl"))] | length == 0' \
    "binary_ctl: not traced"
check "$JQDEFS"' all($s[]; (.service == "e2e-python") and root0 and (.spans | length) == 1
    and (.spans[0] | .spanType == "Entry" and http_span("GET:/hello.txt"; "200") and sane_times))' \
    "entry spans answered 200"
check "$JQDEFS"' ([$s[].traceId] | unique | length) == '"$((n - 1))" "a distinct trace id per request"
for c in $(grep -v '^valid$\|^binary_ctl$' "$T/cases.out"); do
    check "$JQDEFS"' [$s[] | select(.spans[0] | tag("url") | endswith("?case='"$c"'"))]
        | length == 1 and (.[0].spans[0].refs | length) == 0
        and (.[0].traceId | startswith("e2e-") | not)' "case $c: a new trace without refs"
done
check "$JQDEFS"' [$s[] | select(.spans[0] | tag("url") | endswith("?case=valid"))]
    | length == 1 and .[0].traceId == "e2e-trace-1" and (.[0].spans[0].refs | length) == 1
    and (.[0].spans[0].refs[0] | .parentTraceSegmentId == "e2e-seg-1" and .parentSpanId == 3
        and .parentService == "e2e-parent" and .parentServiceInstance == "e2e-parent-inst"
        and .parentEndpoint == "GET:/parent" and .networkAddressUsedAtPeer == "127.0.0.1:'"$PY"'")' \
    "the control (a valid sw8) joins its parent"
echo "ok sw8_malformed ($n cases)"
