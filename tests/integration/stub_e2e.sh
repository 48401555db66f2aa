#!/bin/sh
# stub_e2e.sh STUB CLIENT WORKDIR CASE - one end-to-end case of collector-stub.
#
# Starts `collector-stub --listen 127.0.0.1:0 --port-file` (a free loopback port), streams
# segments with stub_client, stops the stub with SIGTERM and checks the JSON lines field by
# field with jq (and `collector-stub tree` output against expected text). Every wait is
# bounded; the trap kills the stub by PID whatever happens.
#
# Cases: identity gzip one many concurrent auth_ok auth_denied bad_protobuf bad_utf8
#        disconnect sigterm tree tree_fixtures
set -u

STUB=$1
CLIENT=$2
WORK=$3
CASE=$4
HERE=$(cd "$(dirname "$0")" && pwd)
SEGS=$WORK/segments.jsonl
BASE=1700000000000 # --base-time: makes every startTime/endTime predictable
STUB_PID=
STUB_RC=
CLIENT_PID=
PORT=

rm -rf "$WORK"
mkdir -p "$WORK" || exit 1

cleanup() {
    if [ -n "$CLIENT_PID" ]; then
        kill -KILL "$CLIENT_PID" 2>/dev/null
        wait "$CLIENT_PID" 2>/dev/null
    fi
    if [ -n "$STUB_PID" ]; then
        kill -KILL "$STUB_PID" 2>/dev/null
        wait "$STUB_PID" 2>/dev/null
    fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

fail() {
    echo "FAIL [$CASE]: $*" >&2
    if [ -s "$WORK/stub.err" ]; then
        echo "--- collector-stub stderr:" >&2
        tail -n 30 "$WORK/stub.err" >&2
    fi
    exit 1
}

command -v jq >/dev/null 2>&1 || fail "jq not found"

# start_stub [ARGS...]: starts the stub on a free port; sets STUB_PID and PORT.
start_stub() {
    rm -f "$WORK/port"
    "$STUB" --listen 127.0.0.1:0 --port-file "$WORK/port" --segments "$SEGS" "$@" \
        2>"$WORK/stub.err" &
    STUB_PID=$!
    n=0
    while :; do
        PORT=$(cat "$WORK/port" 2>/dev/null)
        case "$PORT" in
        '' | *[!0-9]*) ;;
        *) break ;;
        esac
        kill -0 "$STUB_PID" 2>/dev/null || fail "collector-stub exited before listening"
        n=$((n + 1))
        [ $n -le 200 ] || fail "collector-stub wrote no port file within 10 s"
        sleep 0.05
    done
}

# exited PID: true once PID is gone or a zombie (our own child, not yet waited for).
exited() {
    st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
    [ -z "$st" ] || [ "$st" = Z ]
}

# stop_stub: SIGTERM, then wait at most 10 s (SIGKILL after that); sets STUB_RC.
stop_stub() {
    kill -TERM "$STUB_PID" 2>/dev/null
    n=0
    until exited "$STUB_PID"; do
        n=$((n + 1))
        if [ $n -gt 200 ]; then
            kill -KILL "$STUB_PID" 2>/dev/null
            break
        fi
        sleep 0.05
    done
    wait "$STUB_PID"
    STUB_RC=$?
    STUB_PID=
    [ "$STUB_RC" -eq 0 ] || fail "collector-stub exited with $STUB_RC after SIGTERM (137 = killed)"
}

# client ARGS...: runs stub_client against the stub (bounded), output in $WORK/client.out.
client() {
    timeout 60 "$CLIENT" --target "127.0.0.1:$PORT" --base-time "$BASE" "$@" \
        >"$WORK/client.out" 2>&1
    rc=$?
    sed 's/^/  client: /' "$WORK/client.out"
    return $rc
}

lines() {
    if [ -f "$SEGS" ]; then wc -l <"$SEGS" | tr -d ' '; else echo 0; fi
}

# wait_lines N: the stub writes a line per segment as it arrives; wait (bounded) for N.
wait_lines() {
    n=0
    while [ "$(lines)" -lt "$1" ]; do
        n=$((n + 1))
        [ $n -le 100 ] || fail "expected $1 segment lines, found $(lines)"
        sleep 0.05
    done
}

# Every line of the segments file must be one JSON object (one jq run for the whole file).
check_json_lines() {
    out=$(jq -R -r 'try (fromjson | if type == "object" then empty
                                    else "line \(input_line_number): not an object" end)
                    catch "line \(input_line_number): invalid JSON"' "$SEGS" 2>&1) ||
        fail "jq failed on $SEGS: $out"
    [ -z "$out" ] || fail "segments file: $out"
}

# check_multi PREFIX STREAMS COUNT [max]: the multi-trace segments with that prefix, checked
# field by field against what stub_client sent. With "max", fewer segments are allowed (a
# dropped connection), but each one present must be exact and complete.
check_multi() {
    out=$(jq -r -s --arg p "$1" --argjson k "$2" --argjson n "$3" --argjson base "$BASE" \
        --arg mode "${4:-exact}" -f "$HERE/stub_e2e_check.jq" "$SEGS" 2>&1) ||
        fail "jq failed on $SEGS: $out"
    [ -z "$out" ] || fail "segment check (prefix $1):
$out"
}

case "$CASE" in
identity | gzip | one | many | concurrent)
    streams=1
    count=5
    gz=
    case "$CASE" in
    gzip) gz=--gzip ;;
    one) count=1 ;;
    many) count=1000 ;;
    concurrent)
        streams=8
        count=200
        ;;
    esac
    start_stub
    client --prefix p1 --count $count --streams $streams $gz || fail "stub_client failed"
    grep -q "total: sent $((count * streams)), streams matching $streams/$streams" \
        "$WORK/client.out" || fail "client did not send everything"
    total=$((count * streams))
    if [ "$CASE" = concurrent ]; then
        # The same again with one connection per stream.
        client --prefix p2 --count $count --streams 4 --separate-channels ||
            fail "stub_client (separate channels) failed"
        total=$((total + count * 4))
    fi
    wait_lines $total
    stop_stub
    check_multi p1 $streams $count
    [ "$CASE" != concurrent ] || check_multi p2 4 $count
    [ "$(lines)" -eq $total ] || fail "expected $total lines, found $(lines)"
    gzlines=$(grep -c 'gzip-compressed' "$WORK/stub.err")
    if [ "$CASE" = gzip ]; then
        [ "$gzlines" -eq "$count" ] || fail "stub saw $gzlines gzip messages, expected $count"
    else
        [ "$gzlines" -eq 0 ] || fail "stub saw gzip messages on an identity stream"
    fi
    ;;
auth_ok)
    start_stub --auth s3cret-token
    client --prefix ok --count 10 --auth s3cret-token || fail "authenticated stream failed"
    client --prefix okgz --count 10 --auth s3cret-token --gzip --streams 2 ||
        fail "authenticated gzip streams failed"
    wait_lines 30
    stop_stub
    check_multi ok 1 10
    check_multi okgz 2 10
    ;;
auth_denied)
    start_stub --auth s3cret-token
    client --prefix bad --count 10 --auth wrong-token --expect PERMISSION_DENIED ||
        fail "a wrong token was not refused with PERMISSION_DENIED"
    client --prefix none --count 10 --expect PERMISSION_DENIED ||
        fail "a missing token was not refused with PERMISSION_DENIED"
    client --prefix prefixlen --count 3 --auth s3cret --expect PERMISSION_DENIED ||
        fail "a prefix of the token was accepted"
    [ "$(lines)" -eq 0 ] || fail "refused streams wrote $(lines) segments"
    # The refusals do not disturb the next authenticated stream.
    client --prefix good --count 5 --auth s3cret-token || fail "stream after refusals failed"
    wait_lines 5
    stop_stub
    check_multi good 1 5
    [ "$(lines)" -eq 5 ] || fail "expected exactly 5 lines, found $(lines)"
    ;;
bad_protobuf | bad_utf8)
    scen=$(echo "$CASE" | tr _ -)
    start_stub
    client --prefix bad --count 3 --scenario "$scen" --expect INVALID_ARGUMENT ||
        fail "$scen: stream not ended with INVALID_ARGUMENT"
    client --prefix badgz --count 2 --scenario "$scen" --gzip --expect INVALID_ARGUMENT ||
        fail "$scen (gzip): stream not ended with INVALID_ARGUMENT"
    # The stub keeps serving good streams, on new connections and concurrently.
    client --prefix after --count 50 --streams 3 || fail "good streams after $scen failed"
    wait_lines 155
    stop_stub
    check_json_lines
    check_multi bad 1 3     # the good messages before the bad one are kept, exactly
    check_multi badgz 1 2
    check_multi after 3 50
    [ "$(lines)" -eq 155 ] || fail "expected 155 lines (bad message dropped), found $(lines)"
    ;;
disconnect)
    start_stub
    client --prefix gone --count 20 --disconnect || fail "disconnecting client failed"
    grep -q "disconnecting" "$WORK/client.out" || fail "client did not disconnect"
    client --prefix gonegz --count 20 --disconnect --gzip --streams 2 ||
        fail "disconnecting gzip client failed"
    client --prefix after --count 100 --streams 2 || fail "good streams after disconnects failed"
    wait_lines 200
    kill -0 "$STUB_PID" 2>/dev/null || fail "stub died after client disconnects"
    stop_stub
    check_json_lines
    check_multi gone 1 20 max
    check_multi gonegz 2 20 max
    check_multi after 2 100
    ;;
sigterm)
    start_stub
    client --prefix closed --count 250 --streams 4 || fail "streams before SIGTERM failed"
    # A stream still open when SIGTERM arrives: its segments are already written.
    timeout 60 "$CLIENT" --target "127.0.0.1:$PORT" --base-time "$BASE" --prefix open \
        --count 30 --hold 20000 >"$WORK/open.out" 2>&1 &
    CLIENT_PID=$!
    wait_lines 1030
    stop_stub
    wait "$CLIENT_PID"
    CLIENT_PID=
    sed 's/^/  open client: /' "$WORK/open.out"
    grep -q "sent 30 " "$WORK/open.out" || fail "the open stream did not send its 30 segments"
    check_json_lines
    check_multi closed 4 250
    check_multi open 1 30
    [ "$(lines)" -eq 1030 ] || fail "expected 1030 lines after SIGTERM, found $(lines)"
    grep -q "stopped" "$WORK/stub.err" || fail "stub did not log its clean stop"
    ;;
tree)
    start_stub
    client --scenario demo || fail "demo stream failed"
    client --scenario orphan --gzip || fail "orphan stream failed"
    client --prefix multi --count 2 || fail "multi-trace stream failed"
    wait_lines 6
    stop_stub
    check_json_lines
    # Field checks on the demo trace's links (refs) and its error span.
    jq -e -s '
        (map(select(.traceSegmentId == "seg-python-1"))[0].spans
            | map(select((.spanId // 0) == 0))[0]) as $py
        | (map(select(.traceSegmentId == "seg-nginx-1"))[0].spans
            | map(select((.spanId // 0) == 0))[0]) as $ng
        | $py.refs == [{"refType": "CrossProcess", "traceId": "swagent-demo-trace-1",
                        "parentTraceSegmentId": "seg-nginx-1", "parentSpanId": 1,
                        "parentService": "nginx", "parentServiceInstance": "nginx@demo",
                        "parentEndpoint": "GET:/api/orders",
                        "networkAddressUsedAtPeer": "127.0.0.1:8081"}]
          and $py.isError == true
          and ($py.logs[0].time | tostring) == "1700000000030"
          and $py.logs[0].data == [{"key": "event", "value": "error"},
                                   {"key": "error.kind", "value": "KeyError"},
                                   {"key": "message", "value": "order 42 not found"}]
          and $ng.refs[0].parentTraceSegmentId == "seg-curl-1"
          and ($ng.refs[0].parentSpanId // 0) == 0
          and $ng.refs[0].networkAddressUsedAtPeer == "127.0.0.1:8080"' "$SEGS" >/dev/null ||
        fail "demo trace fields differ from what was sent"
    "$STUB" tree "$SEGS" >"$WORK/tree.out" 2>"$WORK/tree.err" || fail "tree exited nonzero"
    [ ! -s "$WORK/tree.err" ] || fail "tree complained: $(cat "$WORK/tree.err")"
    diff -u "$HERE/stub_tree_e2e.expected" "$WORK/tree.out" >&2 ||
        fail "tree output differs from stub_tree_e2e.expected"
    # The same from stdin, in ASCII: key lines.
    "$STUB" tree --ascii - <"$SEGS" >"$WORK/tree_ascii.out" || fail "tree - exited nonzero"
    grep -qx '         `- python  GET:/api/orders  Entry  32 ms (+9)  status=500  \[ERROR\]' \
        "$WORK/tree_ascii.out" || fail "ascii tree: python entry not nested 4 deep with [ERROR]"
    grep -qx '`- (parent segment seg-missing-1 not received)' "$WORK/tree_ascii.out" ||
        fail "ascii tree: orphan marker missing"
    cat "$WORK/tree.out"
    ;;
tree_fixtures)
    fx=$HERE/stub_tree_fixture.jsonl
    "$STUB" tree - <"$fx" >"$WORK/tree.out" 2>"$WORK/tree.err"
    rc=$?
    [ $rc -eq 0 ] || fail "tree on the fixture exited $rc"
    diff -u "$HERE/stub_tree_fixture.expected" "$WORK/tree.out" >&2 ||
        fail "tree output differs from stub_tree_fixture.expected"
    diff -u "$HERE/stub_tree_fixture.stderr" "$WORK/tree.err" >&2 ||
        fail "tree malformed-line messages differ from stub_tree_fixture.stderr"
    # Nothing parsable: nonzero exit. Empty input too. Usage errors: 2.
    printf 'garbage\n{"traceId":\n' | "$STUB" tree - >/dev/null 2>&1 &&
        fail "tree exited 0 although nothing parsed"
    "$STUB" tree /dev/null >/dev/null 2>&1 && fail "tree exited 0 on empty input"
    "$STUB" tree "$WORK/does-not-exist" >/dev/null 2>&1 && fail "tree exited 0 on a missing file"
    "$STUB" tree >/dev/null 2>&1
    [ $? -eq 2 ] || fail "tree without a file is not a usage error (2)"
    # A long chain (deeper than the indentation cap) and a big file stay fast and complete.
    jq -n -c '{traceId: "deep", traceSegmentId: "d", service: "D",
               spans: [range(0; 3000) | {spanId: ., parentSpanId: (. - 1),
                                          startTime: ., endTime: 5000}]}' >"$WORK/deep.jsonl"
    timeout 30 "$STUB" tree --ascii "$WORK/deep.jsonl" >"$WORK/deep.out" ||
        fail "tree on a 3000-deep chain failed"
    [ "$(grep -c ' D  (no operation)  Entry ' "$WORK/deep.out")" -eq 3000 ] ||
        fail "deep chain: not every span printed"
    grep -q '\[depth 2999\] `- D' "$WORK/deep.out" || fail "deep chain: depth marker missing"
    cat "$WORK/tree.out"
    ;;
*)
    fail "unknown case $CASE"
    ;;
esac
echo "PASS [$CASE]"
