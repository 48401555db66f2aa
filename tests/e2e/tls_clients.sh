#!/usr/bin/env bash
# tls_clients.sh - HTTPS clients traced as exits and joined to a traced HTTPS server
# (tls_server.py, Python's ssl): Python urllib (SSL_read_ex/SSL_write_ex, libssl dlopen'ed by
# _ssl long after start-up), http.client with two requests on one TLS connection, an HTTP/1.0
# response framed by the close of the connection (no close_notify: an ordinary end, not an
# error), wget (GnuTLS), git ls-remote (libcurl3-gnutls: GnuTLS through curl's push callback)
# and curl (OpenSSL, memory BIO). Every client request is an exit span with the peer and an
# https:// url, and the server's entry span for it is its child.
E2E_NAME=tls_clients
. "$E2E_DIR/lib.sh"
. "$E2E_DIR/tls_lib.sh"
for p in wget git curl; do
    command -v $p >/dev/null || { echo "FAIL: $p not installed" >&2; exit 1; }
done
e2e_init
start_stub
tls_certs
start_tls_backend e2e-tlsrv
P=$TLSPY
CA=$T/tls/ca.pem
T_START=$(now_ms)

out=$(traced e2e-urllib python3 -c '
import ssl, sys, urllib.request
c = ssl.create_default_context(cafile=sys.argv[1])
print(urllib.request.urlopen("https://127.0.0.1:%s/u" % sys.argv[2], context=c).read().decode(), end="")
print(urllib.request.urlopen("https://127.0.0.1:%s/close" % sys.argv[2], context=c).read().decode(), end="")
' "$CA" "$P") || fail "urllib failed"
[ "$out" = $'{"orders": [1, 2, 3]}\n{"orders": [1, 2, 3]}' ] || fail "urllib got: $out"

out=$(traced e2e-httpclient python3 -c '
import http.client, ssl, sys
c = http.client.HTTPSConnection("127.0.0.1", int(sys.argv[2]),
                                context=ssl.create_default_context(cafile=sys.argv[1]))
for p in ("/h1", "/h2"):
    c.request("GET", p)
    r = c.getresponse()
    print(r.status, r.read().decode(), end="")
' "$CA" "$P") || fail "http.client failed"
[ "$out" = $'200 {"orders": [1, 2, 3]}\n200 {"orders": [1, 2, 3]}' ] || fail "http.client got: $out"

out=$(traced e2e-wget wget -q -O - --ca-certificate="$CA" "https://127.0.0.1:$P/w") || fail "wget failed"
[ "$out" = '{"orders": [1, 2, 3]}' ] || fail "wget got: $out"

traced e2e-git env GIT_SSL_CAINFO="$CA" GIT_TERMINAL_PROMPT=0 HOME="$T" \
    git ls-remote "https://127.0.0.1:$P/status/404/repo.git" >"$T/git.out" 2>&1 &&
    fail "git ls-remote of a 404 succeeded"
grep -q "not found" "$T/git.out" || fail "git: $(cat "$T/git.out")"

out=$(traced e2e-curl curl -sS --cacert "$CA" "https://127.0.0.1:$P/c") || fail "curl failed"
[ "$out" = '{"orders": [1, 2, 3]}' ] || fail "curl got: $out"

# urllib 2, http.client 2, wget 1, git 1, curl 1 exits, each its own segment; 7 server entries.
wait_segments 14
T_END=$(now_ms)
check 'length == 14' "expected exactly 14 segments"
check "$JQDEFS"' all($s[]; root0) and all($s[].spans[]; sane_times)' "roots and times"
check "$JQDEFS"' [seg("e2e-urllib"), seg("e2e-httpclient"), seg("e2e-wget"), seg("e2e-git"),
    seg("e2e-curl"), seg("e2e-tlsrv")] | map(length) == [2, 2, 1, 1, 1, 7]' "segments per service"
check "$JQDEFS"' [$s[] | select(.service != "e2e-tlsrv") | .spans | length == 1
    and (.[0] | .spanType == "Exit" and .peer == "127.0.0.1:'"$P"'"
    and (tag("url") | startswith("https://127.0.0.1:'"$P"'/")))] | all' "client exits: peer, https url"
check "$JQDEFS"' [seg("e2e-urllib")[].spans[0] | [.operationName, tag("http.status_code")]] | sort
    == [["GET:/close", "200"], ["GET:/u", "200"]]' "urllib exits (the close-framed one is no error)"
check "$JQDEFS"' [seg("e2e-urllib")[].spans[0].isError] == [false, false]' "urllib: no error span"
check "$JQDEFS"' [seg("e2e-httpclient")[].spans[0] | http_span(.operationName; "200")
    and (.operationName == "GET:/h1" or .operationName == "GET:/h2")] == [true, true]
    and ([seg("e2e-httpclient")[].spans[0].operationName] | unique | length) == 2' \
    "http.client: two requests on one TLS connection"
check "$JQDEFS"' seg("e2e-wget")[0].spans[0] | http_span("GET:/w"; "200")' "wget (GnuTLS) exit"
check "$JQDEFS"' seg("e2e-git")[0].spans[0] | .operationName == "GET:/status/404/repo.git/info/refs"
    and tag("http.status_code") == "404" and .isError' "git (libcurl3-gnutls) exit"
check "$JQDEFS"' seg("e2e-curl")[0].spans[0] | http_span("GET:/c"; "200")' "curl exit"
check "$JQDEFS"' all(seg("e2e-tlsrv")[]; .spans | length == 1 and (.[0] | .spanType == "Entry"
    and (tag("url") // "" | startswith("https://"))))' "server entries (https url)"
check "$JQDEFS"' all(seg("e2e-tlsrv")[]; . as $v
    | [$s[] | select(.service != "e2e-tlsrv" and .traceId == $v.traceId)] as $c
    | ($c | length) == 1 and links($v; $c[0]; $c[0].spans[0]))' "every server entry joins its client exit"
echo "ok tls_clients"
