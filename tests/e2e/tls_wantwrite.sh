#!/usr/bin/env bash
# tls_wantwrite.sh - sw8 inserted into a TLS stream under OpenSSL's retry rule: a non-blocking
# OpenSSL client (tls_nb_client.c: SO_SNDBUF 4096, no partial-write or moving-buffer mode)
# writes a large POST head + body with one SSL_write, repeated with the same arguments after
# every WANT_WRITE, to a slow untraced reader (tls_slow_server.py: small receive buffer,
# sleeps before reading). For several head and body sizes (so the WANT_WRITE falls before,
# inside and after the inserted line): SSL_write returns exactly the application's length,
# never "bad write retry"; the server received exactly the application's bytes plus one sw8
# line just before the head's blank line; that sw8 names the client's exit span, which has
# the server's status.
E2E_NAME=tls_wantwrite
. "$E2E_DIR/lib.sh"
. "$E2E_DIR/tls_lib.sh"
[ -x "${TLS_NB_CLIENT:-}" ] || { echo "FAIL: TLS_NB_CLIENT (tls_nb_client) not built: libssl-dev missing?" >&2; exit 1; }
e2e_init
start_stub
tls_certs
mkdir -p "$T/recv"
start_server slow python3 -u "$E2E_DIR/tls_slow_server.py" "$T/tls/srv.pem" "$T/tls/srv.key" "$T/recv"
S=$PORT
T_START=$(now_ms)
n=0
wants_total=0
# Heads stay below the HTTP/1.x parser's 64 KiB (a longer one gets no sw8, as in clear text).
for size in "20000 0" "40000 1" "60000 30000" "12000 90000" "33000 500" "52000 120000" "63000 64"; do
    read -r pad body <<<"$size"
    n=$((n + 1))
    out=$(traced e2e-nb "$TLS_NB_CLIENT" "$S" "$T/tls/ca.pem" "$pad" "$body" "$T/app-$n.bin" 2>"$T/nb-$n.err") ||
        fail "run $n ($pad/$body): client failed: $out $(cat "$T/nb-$n.err")"
    echo "run $n pad=$pad body=$body: $out"
    w=$(sed -n 's/^wants=\([0-9]*\) .*/\1/p' <<<"$out")
    wants_total=$((wants_total + w))
    wait_for "[ -s '$T/recv/conn-$n.bin' ]" 10 || fail "run $n: the server kept nothing"
    # The bytes received = the application's + one sw8 line before the blank line of the head.
    python3 - "$T/app-$n.bin" "$T/recv/conn-$n.bin" "$T/sw8-$n" <<'PY' || fail "run $n: bytes differ"
import sys
app = open(sys.argv[1], "rb").read()
got = open(sys.argv[2], "rb").read()
end = got.index(b"\r\n\r\n") + 2           # the blank line of the received head
lines = got[:end].split(b"\r\n")
sw = [l for l in lines if l.lower().startswith(b"sw8:")]
assert len(sw) == 1, "sw8 lines: %r" % sw
line = sw[0] + b"\r\n"
assert got[end - len(line):end] == line, "the sw8 line is not the head's last"
assert got[:end - len(line)] + got[end:] == app, "received != application bytes + sw8 line"
assert len(got) == len(app) + len(line)
open(sys.argv[3], "w").write(sw[0][4:].strip().decode())
PY
done
[ "$wants_total" -gt 0 ] || fail "no SSL_write hit WANT_WRITE: the test proves nothing"

wait_segments $n
T_END=$(now_ms)
check "length == $n" "one segment per run"
check "$JQDEFS"' all($s[]; .service == "e2e-nb" and (.spans | length == 1) and (.spans[0] |
    .spanType == "Exit" and http_span("POST:/nb"; "200") and .peer == "127.0.0.1:'"$S"'"
    and tag("url") == "https://127.0.0.1:'"$S"'/nb"))' "exit spans"
for i in $(seq 1 $n); do
    read -r tid sid span <<<"$(sw8_fields "$(cat "$T/sw8-$i")")"
    check "$JQDEFS"' any($s[]; .traceId == "'"$tid"'" and .traceSegmentId == "'"$sid"'")
        and '"$span"' == 0' "run $i: the received sw8 names the client's exit"
done
echo "ok tls_wantwrite (WANT_WRITE $wants_total times)"
