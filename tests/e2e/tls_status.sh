#!/usr/bin/env bash
# tls_status.sh - what the agent cannot see of HTTPS is said where it can be told:
# `swagent status` lists, for each live traced process, the TLS libraries it follows (a shared
# libssl / libgnutls) and those it cannot see (OpenSSL/BoringSSL linked into the executable,
# e.g. NodeSource's node; Java's JSSE); `swagent run` warns before running a program with
# OpenSSL linked into it.
E2E_NAME=tls_status
. "$E2E_DIR/lib.sh"
. "$E2E_DIR/tls_lib.sh"
command -v node >/dev/null || { echo "FAIL: node not installed" >&2; exit 1; }
e2e_init
start_stub
tls_certs
start_tls_backend e2e-stpy
curl -sS --cacert "$T/tls/ca.pem" "https://127.0.0.1:$TLSPY/" >/dev/null || fail "request to python"
wait_segments 1
"$SWAGENT_CLI" status --runtime-dir "$T/run" >"$T/status.out" 2>&1 || fail "swagent status failed"
grep -A1 "service=e2e-stpy " "$T/status.out" | grep -q "tls: followed: libssl.so.3; NOT seen: nothing known;" ||
    fail "status of the python server: $(cat "$T/status.out")"

# NodeSource's node crashes at start under any ASan-instrumented preload (an empty one too,
# measured): in the sanitizer stage the node half cannot run (stage 1 runs it).
if ldd "$SWAGENT_LIB" 2>/dev/null | grep -q libclang_rt.asan; then
    echo "SKIP: node cannot start under an ASan-instrumented preload; its half runs in stage 1"
    exit 77
fi
start_server node traced e2e-stnode node -e '
const s = require("http").createServer((q, r) => r.end("ok\n"));
s.listen(0, "127.0.0.1", () => console.log("PORT " + s.address().port));'
curl -sS "http://127.0.0.1:$PORT/" >/dev/null || fail "request to node"
SEG_FROM=1
wait_segments 1

# Does this node have OpenSSL linked in (NodeSource) or use the shared libssl (Debian)?
NODE_BIN=$(readlink -f "$(command -v node)")
if readelf --dyn-syms -W "$NODE_BIN" | awk '$7 != "UND" && $8 ~ /^SSL_write(@|$)/' | grep -q .; then
    node_expect="NOT seen: OpenSSL/BoringSSL linked into $NODE_BIN;"
    "$SWAGENT_CLI" run -- node -e 0 2>"$T/run.err"
    grep -q "has OpenSSL (or BoringSSL) linked into it: its HTTPS traffic is NOT seen" "$T/run.err" ||
        fail "swagent run did not warn about node: $(cat "$T/run.err")"
else
    node_expect="followed: libssl.so.3;"
fi
"$SWAGENT_CLI" status --runtime-dir "$T/run" >"$T/status.out" 2>&1 || fail "swagent status failed"
grep -A1 "service=e2e-stnode " "$T/status.out" | grep -qF "$node_expect" ||
    fail "status of node (expected '$node_expect'): $(cat "$T/status.out")"
echo "ok tls_status"
