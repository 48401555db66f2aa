# tls_lib.sh - helpers of the HTTPS end-to-end tests (sourced after lib.sh; bash).
#
# Certificates are made by each test in $T/tls with openssl: a CA (ca.pem) and a server
# certificate for 127.0.0.1 / localhost signed by it (srv.pem, srv.key), plus a second,
# unrelated CA (other.pem) for the wrong-certificate cases. Nothing is fixed or checked in.

# tls_certs: writes the CA, the server key and certificate, and the unrelated CA.
tls_certs() {
    local d=$T/tls
    mkdir -p "$d"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
        -subj /CN=swagent-test-ca -keyout "$d/ca.key" -out "$d/ca.pem" 2>"$d/openssl.err" ||
        fail "openssl: CA"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=127.0.0.1 \
        -keyout "$d/srv.key" -out "$d/srv.csr" 2>>"$d/openssl.err" || fail "openssl: CSR"
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n' >"$d/ext"
    openssl x509 -req -in "$d/srv.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
        -days 2 -extfile "$d/ext" -out "$d/srv.pem" 2>>"$d/openssl.err" || fail "openssl: sign"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
        -subj /CN=swagent-other-ca -keyout "$d/other.key" -out "$d/other.pem" \
        2>>"$d/openssl.err" || fail "openssl: other CA"
    chmod 644 "$d"/*.key # nginx workers (nobody) do not read keys: the master does; tests only
}

# start_tls_backend SERVICE: tests/e2e/tls_server.py (Python's ssl, SSLContext.wrap_socket,
# SSL_read_ex/SSL_write_ex) traced as SERVICE; sets TLSPY to its port. It logs every request's
# sw8 header to $T/tlspy.sw8.
start_tls_backend() {
    start_server tlspy traced "$1" python3 -u "$E2E_DIR/tls_server.py" "$T/tls/srv.pem" \
        "$T/tls/srv.key" "$T/tlspy.sw8"
    TLSPY=$PORT
}

# sw8_fields SW8: "traceId segmentId spanId" decoded from an sw8 header value.
sw8_fields() {
    python3 -c '
import base64, sys
f = sys.argv[1].split("-")
d = lambda s: base64.b64decode(s).decode()
print(d(f[1]), d(f[2]), f[3])' "$1"
}
