"""tls_server.py CERT KEY SW8_LOG - the HTTPS tests' Python server.

http.server on a kernel-chosen loopback port behind ssl.SSLContext.wrap_socket (so OpenSSL's
SSL_read_ex/SSL_write_ex with the socket given by SSL_set_fd): GET answers a small JSON body
(HTTP/1.1, Content-Length, keep-alive), /close answers HTTP/1.0 framed by the close of the
connection, /status/NNN answers that status. Each request's sw8 header (or "-") is appended
to SW8_LOG. Prints "PORT n" once listening.
"""
import http.server
import socketserver
import ssl
import sys
import time

cert, key, log = sys.argv[1:4]


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        with open(log, "a") as f:
            f.write((self.headers.get("sw8") or "-") + "\n")
        body = b'{"orders": [1, 2, 3]}\n'
        status = 200
        if self.path == "/slow":
            time.sleep(1)  # the client goes away meanwhile (tls_bad.sh)
        if self.path.startswith("/status/"):
            status = int(self.path[8:11])
        if self.path == "/close":
            self.protocol_version = "HTTP/1.0"
            self.close_connection = True
            self.send_response(status)
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(n)
        with open(log, "a") as f:
            f.write((self.headers.get("sw8") or "-") + "\n")
        body = ("%d\n" % len(data)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def get_request(self):
        # The handshake happens on the request's thread (first read), so a client that never
        # completes one blocks nobody else.
        sock, addr = super().get_request()
        return ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def handle_error(self, request, client_address):
        print("error from %s: %s" % (client_address, sys.exc_info()[1]), file=sys.stderr)


ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv = S(("127.0.0.1", 0), H)
print("PORT %d" % srv.server_address[1], flush=True)
srv.serve_forever()
