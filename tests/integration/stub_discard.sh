#!/bin/sh
# stub_discard.sh - collector-stub --discard: segments are parsed and counted, never written;
# a malformed message is still refused (INVALID_ARGUMENT) and counted.
#
#   stub_discard.sh STUB STUB_CLIENT WORKDIR
#
# stub_client streams 3 good SegmentObjects and then one that does not parse (gzip and
# identity), then 3 streams of 50 good ones; then on collectInSync (--sync, counted by
# collector-stub/pbwalk.c) one collection of 2,000 good segments (identity and gzip), an empty
# one, and one of 100 good segments with a truncated one in the middle (refused whole:
# INVALID_ARGUMENT "cannot parse SegmentCollection"). The stub must log, when stopped with
# SIGTERM, `received 4156 segment(s) in 159 message(s) (...), refused 3 message(s)` and write
# nothing. Bounded waits; the stub is stopped by its PID.
set -u
STUB=$1 CLIENT=$2 WORK=$3
rm -rf "$WORK"
mkdir -p "$WORK" || exit 1
STUB_PID=
cleanup() { [ -n "$STUB_PID" ] && kill -KILL "$STUB_PID" 2>/dev/null; }
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
fail() {
    echo "FAIL [stub_discard]: $*" >&2
    tail -n 20 "$WORK/stub.err" >&2
    exit 1
}

"$STUB" --listen 127.0.0.1:0 --port-file "$WORK/port" --segments "$WORK/seg.json" --discard \
    2>"$WORK/stub.err" &
STUB_PID=$!
n=0
until [ -s "$WORK/port" ]; do
    n=$((n + 1))
    [ $n -le 200 ] || fail "no port file within 10 s"
    sleep 0.05
done
PORT=$(cat "$WORK/port")
client() { timeout 60 "$CLIENT" --target "127.0.0.1:$PORT" "$@" >>"$WORK/client.out" 2>&1; }
client --prefix bad --count 3 --scenario bad-protobuf --expect INVALID_ARGUMENT ||
    fail "bad protobuf not refused"
client --prefix badgz --count 3 --scenario bad-protobuf --gzip --expect INVALID_ARGUMENT ||
    fail "bad protobuf (gzip) not refused"
client --prefix good --count 50 --streams 3 || fail "good streams failed"
client --sync --prefix sync --count 2000 || fail "collection of 2,000 not accepted"
client --sync --prefix syncgz --count 2000 --gzip || fail "collection of 2,000 (gzip) not accepted"
client --sync --prefix syncempty --count 0 || fail "empty collection not accepted"
client --sync --prefix syncbad --count 100 --scenario bad-protobuf --expect INVALID_ARGUMENT ||
    fail "collection with a bad segment not refused"
grep -q 'status INVALID_ARGUMENT (3) "cannot parse SegmentCollection"' "$WORK/client.out" ||
    fail "collection refused for another reason: $(grep INVALID "$WORK/client.out")"
kill -TERM "$STUB_PID"
n=0
while kill -0 "$STUB_PID" 2>/dev/null; do
    n=$((n + 1))
    [ $n -le 200 ] || fail "stub did not stop within 10 s"
    sleep 0.05
done
wait "$STUB_PID"
rc=$?
STUB_PID=
[ $rc -eq 0 ] || fail "exit status $rc"
grep -q 'received 4156 segment(s) in 159 message(s) ([0-9]* wire bytes), refused 3 message(s)' \
    "$WORK/stub.err" || fail "wrong totals: $(grep received "$WORK/stub.err")"
[ ! -s "$WORK/seg.json" ] || fail "segments written with --discard"
echo "ok - stub_discard"
