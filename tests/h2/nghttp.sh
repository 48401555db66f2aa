#!/usr/bin/env bash
# nghttp.sh - HTTP/2 between real programs, every stream a span and none mis-parented:
# nghttp -m 100 (100 concurrent streams on one connection) against nghttpd over TLS (ALPN h2),
# curl --http2 over TLS (ALPN h2, OpenSSL), git ls-remote (libcurl3-gnutls: ALPN h2 on GnuTLS;
# a 404), curl --http2-prior-knowledge against nghttpd --no-tls, and
# the upgrade from HTTP/1.1 (curl --http2 and nghttp -u on http://, "Upgrade: h2c") against
# h2c_server.py (python3-h2; nghttpd does not upgrade): stream 1 is the upgraded request, its
# HTTP/1.1 span the stream's span, and the streams after it HTTP/2 spans. Clients and servers
# traced: each request one trace of the client's exit and the server's entry, its child.
E2E_NAME=h2_nghttp
. "$E2E_DIR/lib.sh"
. "$E2E_DIR/tls_lib.sh"
. "$H2_DIR/h2lib.sh"
h2_setup nghttp nghttpd curl git
$PY3 -c 'import h2' 2>/dev/null || fail "python3-h2 is not installed (scripts/deps.sh)"
start_nghttpd h2-nghttpd
NT=$NGHTTPD
start_nghttpd h2-nghttpdc --no-tls
NC=$NGHTTPD
echo hello >"$T/www/f.txt"
start_server h2c traced h2-h2c $PY3 -u "$H2_DIR/h2c_server.py" "$T/h2c.log"
HC=$PORT
T_START=$(now_ms)

traced h2-nghttp nghttp -n -m 100 -s "https://127.0.0.1:$NT/f.txt" >"$T/nghttp.out" 2>&1 ||
    fail "nghttp -m 100: $(tail -3 "$T/nghttp.out")"
[ "$(grep -c ' 200 .* /f.txt$' "$T/nghttp.out")" = 100 ] || fail "nghttp: not 100 answers"
out=$(traced h2-curl curl -sS --http2 --cacert "$CA" "https://127.0.0.1:$NT/f.txt") || fail "curl --http2 (TLS)"
[ "$out" = hello ] || fail "curl --http2 (TLS) got: $out"
traced h2-git env GIT_SSL_CAINFO="$CA" GIT_TERMINAL_PROMPT=0 HOME="$T" \
    git ls-remote "https://127.0.0.1:$NT/repo.git" >"$T/git.out" 2>&1 && fail "git ls-remote of a 404 succeeded"
grep -q "not found" "$T/git.out" || fail "git: $(cat "$T/git.out")"
out=$(traced h2-curlpk curl -sS --http2-prior-knowledge "http://127.0.0.1:$NC/f.txt") ||
    fail "curl --http2-prior-knowledge"
[ "$out" = hello ] || fail "curl --http2-prior-knowledge got: $out"
out=$(traced h2-curlup curl -sS --http2 "http://127.0.0.1:$HC/up") || fail "curl --http2 (h2c)"
[ "$out" = "hi /up" ] || fail "curl --http2 (h2c) got: $out"
traced h2-nghttpu nghttp -u -m 3 "http://127.0.0.1:$HC/nu" >"$T/nghttpu.out" 2>&1 ||
    fail "nghttp -u: $(cat "$T/nghttpu.out")"
[ "$(grep -c '^hi /nu$' "$T/nghttpu.out")" = 3 ] || fail "nghttp -u: $(cat "$T/nghttpu.out")"

# 100 + 1 + 1 + 1 + 1 + 3 client exits, as many server entries.
wait_segments 214 30
T_END=$(now_ms)
CLI='def cli: .service | IN("h2-nghttp", "h2-curl", "h2-git", "h2-curlpk", "h2-curlup", "h2-nghttpu");
def srv: .service | IN("h2-nghttpd", "h2-nghttpdc", "h2-h2c");'
check 'length == 214' "expected exactly 214 segments"
check "$JQDEFS"' all($s[]; root0) and all($s[].spans[]; sane_times)' "roots and times"
check "$JQDEFS"' [seg("h2-nghttp"), seg("h2-curl"), seg("h2-git"), seg("h2-curlpk"), seg("h2-curlup"),
    seg("h2-nghttpu"), seg("h2-nghttpd"), seg("h2-nghttpdc"), seg("h2-h2c")]
    | map(length) == [100, 1, 1, 1, 1, 3, 102, 1, 4]' "segments per service"
check "$JQDEFS"' ([$s[].traceId] | unique | length) == 107' "one trace per request"
check "$JQDEFS$H2DEFS$CLI"' all($s[] | select(cli and .service != "h2-git"); .spans | length == 1
    and (.[0] | .spanType == "Exit" and h2_http("GET:" + (tag("url") | sub("^https?://[^/]*"; "")); "200")))' \
    "every client request an exit GET:/path with status 200"
check "$JQDEFS$H2DEFS"' seg("h2-git")[0].spans | length == 1 and (.[0] | .spanType == "Exit" and .isError
    and h2_http("GET:/repo.git/info/refs"; "404"))' "git (GnuTLS, ALPN h2): an exit, 404 an error"
check "$JQDEFS$H2DEFS$CLI"' all($s[] | select(srv); .spans | length == 1
    and (.[0] | .spanType == "Entry" and h2_http(.operationName; tag("http.status_code"))))
    and ([$s[] | select(srv) | .spans[0] | tag("http.status_code")] | group_by(.) | map([.[0], length]))
        == [["200", 106], ["404", 1]]' "every server stream an entry (one 404, git)"
check "$JQDEFS"' [seg("h2-nghttp")[].spans[0].operationName] | unique == ["GET:/f.txt"]' "nghttp names"
check "$JQDEFS"' [seg("h2-nghttpu")[].spans[0].operationName] | unique == ["GET:/nu"]' "nghttp -u names"
# No stream mis-parented: every server entry's ref names the one exit of its own trace, and
# the 100 streams of nghttp's one connection are 100 different parents.
check "$JQDEFS$CLI"' all($s[] | select(srv); . as $v
    | [$s[] | select(.traceId == $v.traceId and cli)] as $c
    | ($c | length) == 1 and links($v; $c[0]; $c[0].spans[0]))' "every server entry the child of its exit"
check "$JQDEFS"' [seg("h2-nghttpd")[].spans[0].refs[0].parentTraceSegmentId] | unique | length == 102' \
    "102 distinct parents at nghttpd"
# The upgraded request (stream 1) carried sw8 in its HTTP/1.1 head, the later streams in their
# HEADERS: every request the h2c server logged has one.
[ "$(grep -c ' -$' "$T/h2c.log")" = 0 ] || fail "a request reached h2c_server.py without sw8: $(cat "$T/h2c.log")"
[ "$(wc -l <"$T/h2c.log")" = 4 ] || fail "h2c_server.py logged: $(cat "$T/h2c.log")"
echo "ok h2_nghttp"
