#!/usr/bin/env bash
# bad.sh - HTTP/2 bad input (raw_h2.py, hand-made frames on plain sockets): a broken preface,
# a HEADERS block that fails HPACK decoding, a CONTINUATION flood (20,000 frames), a 1 MB
# header list, frames of unknown types; sent by a client to a traced server (c_*) and by a
# server to a traced client (s_*). No process dies; every byte each side reads is the one it
# reads untraced (sha256 of each stream, traced against untraced); the connections with
# undecodable or oversized header blocks stop being followed, counted (swagent status's h2:
# line) and logged; the broken preface is no HTTP/2 (nor HTTP/1.x: not followed, no span); the unknown
# frame types are skipped (the request after them is still a span, status 200).
E2E_NAME=h2_bad
. "$E2E_DIR/lib.sh"
. "$E2E_DIR/tls_lib.sh"
. "$H2_DIR/h2lib.sh"
h2_setup
RAW="$PY3 -u $H2_DIR/raw_h2.py"
start_server victim traced h2-victim $RAW serve victim
VT=$PORT VT_PID=$LAST_PID
start_server victim0 $RAW serve victim
V0=$PORT
start_server bad $RAW serve bad
BAD=$PORT
T_START=$(now_ms)

CC="c_good c_preface c_hpack c_flood c_big c_unknown"
SC="s_good s_hpack s_flood s_unknown"
for c in $CC; do
    $RAW client "$VT" $c >"$T/$c.traced" 2>&1 || fail "client $c (traced server): $(cat "$T/$c.traced")"
    $RAW client "$V0" $c >"$T/$c.plain" 2>&1 || fail "client $c: $(cat "$T/$c.plain")"
    cmp -s "$T/$c.plain" "$T/$c.traced" || fail "$c: the client read other bytes from the traced server"
done
# What the traced server read, case by case, is what the untraced one read.
wait_for "[ \$(grep -c '^got' '$T/victim.out') -ge 6 ]" 10 || fail "the traced server did not read every case"
grep '^got' "$T/victim.out" >"$T/victim.got"
grep '^got' "$T/victim0.out" >"$T/victim0.got"
cmp -s "$T/victim0.got" "$T/victim.got" || fail "the traced server read other bytes than the untraced one"
kill -0 "$VT_PID" 2>/dev/null || fail "the traced server died"
for c in $SC; do
    traced h2-rawcli $RAW client "$BAD" $c >"$T/$c.traced" 2>&1 || fail "traced client $c: $(cat "$T/$c.traced")"
    $RAW client "$BAD" $c >"$T/$c.plain" 2>&1 || fail "client $c: $(cat "$T/$c.plain")"
    cmp -s "$T/$c.plain" "$T/$c.traced" || fail "$c: the traced client read other bytes"
done

# Spans: c_good and c_unknown served (entries, 200); s_good and s_unknown exits (200); the
# s_hpack and s_flood exits end as errors (their replies cannot be followed).
wait_for "[ \$(jq -s '[.[].spans[]] | length' '$T/seg.json') -ge 6 ]" 20 || fail "spans did not arrive"
sleep 1.5
T_END=$(now_ms)
check "$JQDEFS$H2DEFS"' [seg("h2-victim")[].spans[] | [.spanType, .operationName, tag("http.status_code")]]
    | sort == [["Entry", "GET:/c_good", "200"], ["Entry", "GET:/c_unknown", "200"]]' \
    "traced server: the good request and the one after unknown frames, no other"
check "$JQDEFS$H2DEFS"' [seg("h2-rawcli")[].spans[] | select(.spanType == "Exit")] | length == 4' "four client exits"
check "$JQDEFS$H2DEFS"' [seg("h2-rawcli")[].spans[] | [.operationName, .isError,
    (tag("http.status_code") // "-")]] | sort == [["GET:/s_flood", true, "-"], ["GET:/s_good", false, "200"],
    ["GET:/s_hpack", true, "-"], ["GET:/s_unknown", false, "200"]]' \
    "traced client: good and unknown-frame replies followed, the bad ones error spans"
# The traced server's counters (swagent status, the 'h2:' line under its ring) say why each
# bad connection stopped being followed: the undecodable block, the flood (framing), the 1 MB
# list; the three frames of unknown types were skipped. The broken preface never was HTTP/2.
"$SWAGENT_CLI" status --runtime-dir "$T/run" >"$T/status.out" 2>&1 || fail "swagent status: $(cat "$T/status.out")"
h2line=$(awk -v pid="$VT_PID" '$1 == "pid" && $2 == pid { mine = 1; next } $1 == "pid" { mine = 0 }
    mine && $1 == "h2:" { print }' "$T/status.out")
[ -n "$h2line" ] || fail "no h2: line for the traced server (pid $VT_PID): $(cat "$T/status.out")"
for kv in bad_preface=0 hpack=1 framing=1 list_too_big=1 unknown_frames=3; do
    echo " $h2line" | grep -q "[ ;]$kv\b" || fail "traced server's counters: want $kv, got: $h2line"
done
# And the agent's log says why, once per reason (WARN lines of swagent.log).
for what in "h2: HPACK header block failed to decode" "h2: CONTINUATION flood" "h2: header list too large"; do
    grep -q "$what" "$T/run/swagent.log" || fail "the agent log lacks '$what': $(grep 'h2:' "$T/run/swagent.log" | head -5)"
done
echo "ok h2_bad"
