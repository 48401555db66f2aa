#!/usr/bin/env bash
# bytes.sh - byte transparency: payloads of 1 B, 1 KiB, 64 KiB, 1 MiB and 8 MiB, downloaded
# (python3 -m http.server) and uploaded (upload_server.py answers the sha256 of the body; plain
# and chunked uploads), with every combination of {client, server} x {traced, not traced}: the
# checksums are identical everywhere. Every traced request also makes exactly one segment
# with status 200 (so the agent was really in the path).
E2E_NAME=bytes
. "$E2E_DIR/lib.sh"
e2e_init
start_stub
mkdir "$T/www"
SIZES="1 1024 65536 1048576 8388608"
for s in $SIZES; do head -c "$s" /dev/urandom >"$T/www/f$s"; done

start_server dl_plain python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/www"
DL_plain=$PORT
start_server dl_traced traced e2e-dl python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/www"
DL_traced=$PORT
start_server up_plain python3 -u "$E2E_DIR/upload_server.py"
UP_plain=$PORT
start_server up_traced traced e2e-up python3 -u "$E2E_DIR/upload_server.py"
UP_traced=$PORT

client() { # plain|traced curl args...
    local mode=$1
    shift
    if [ "$mode" = traced ]; then traced e2e-curl curl "$@"; else curl "$@"; fi
}

expect=0
for s in $SIZES; do
    want=$(sha256sum <"$T/www/f$s" | cut -d' ' -f1)
    for cm in plain traced; do
        for sm in plain traced; do
            eval dl=\$DL_$sm up=\$UP_$sm
            got=$(client $cm -sSf "http://127.0.0.1:$dl/f$s" | sha256sum | cut -d' ' -f1)
            [ "$got" = "$want" ] || fail "download of $s B (client $cm, server $sm): checksum differs"
            got=$(client $cm -sSf --data-binary "@$T/www/f$s" -H 'Content-Type: application/octet-stream' \
                "http://127.0.0.1:$up/up")
            [ "$got" = "$want $s" ] || fail "upload of $s B (client $cm, server $sm): got '$got'"
            got=$(client $cm -sSf --data-binary "@$T/www/f$s" -H 'Transfer-Encoding: chunked' \
                "http://127.0.0.1:$up/chunked")
            [ "$got" = "$want $s" ] || fail "chunked upload of $s B (client $cm, server $sm): got '$got'"
            n=0
            [ $cm = traced ] && n=$((n + 3))
            [ $sm = traced ] && n=$((n + 3))
            expect=$((expect + n))
        done
    done
done
wait_segments "$expect" 30
T_END=$(now_ms)
check "length == $expect" "one segment per traced side of each request ($expect)"
check "$JQDEFS"' all($s[]; root0 and (.spans | length) == 1 and (.spans[0] | tag("http.status_code") == "200"
    and .isError == false and sane_times))' "every span: 200, no error, sane times"
check "$JQDEFS"' (seg("e2e-up") | map(.spans[0].operationName) | unique) == ["POST:/chunked", "POST:/up"]
    and (seg("e2e-dl") | length) == 10 and (seg("e2e-up") | length) == 20 and (seg("e2e-curl") | length) == 30' \
    "segments per service"
# Traced client to traced server: every entry joined to an exit.
check "$JQDEFS"' ([seg("e2e-dl")[], seg("e2e-up")[]] | map(select(.spans[0].refs | length == 1)) | length) == 15
    and all(([seg("e2e-dl")[], seg("e2e-up")[]] | map(select(.spans[0].refs | length == 1)))[]; . as $p
    | (seg("e2e-curl") | map(select(.traceSegmentId == $p.spans[0].refs[0].parentTraceSegmentId)))
    | length == 1 and (.[0] as $c | links($p; $c; $c.spans[0])))' "traced pairs joined"
echo "ok bytes"
