#!/usr/bin/env python3
"""upload_server.py: a tiny HTTP/1.1 server on 127.0.0.1 (kernel-chosen port, printed as
"PORT n"). POST any path: answers 200 with the sha256 (hex) and the length of the request body
(Content-Length or chunked). Used to check that uploads pass a traced client or server intact."""
import hashlib
import http.server
import socketserver


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        h = hashlib.sha256()
        total = 0
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                data = self.rfile.read(size)
                h.update(data)
                total += len(data)
                self.rfile.readline()
        else:
            left = int(self.headers.get("Content-Length", "0"))
            while left > 0:
                data = self.rfile.read(min(left, 1 << 16))
                if not data:
                    break
                h.update(data)
                total += len(data)
                left -= len(data)
        body = ("%s %d\n" % (h.hexdigest(), total)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


srv = Server(("127.0.0.1", 0), Handler)
print("PORT %d" % srv.server_address[1], flush=True)
srv.serve_forever()
