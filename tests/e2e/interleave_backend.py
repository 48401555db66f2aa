#!/usr/bin/env python3
"""interleave_backend.py: a threaded HTTP/1.1 server on 127.0.0.1 (kernel-chosen port, printed
as "PORT n") for interleave.sh. GET or POST any path: reads the body (Content-Length), waits a
few milliseconds (so that requests overlap in the proxy in front), answers 200 with
"<request target> <body length>\n"."""
import http.server
import random
import socketserver
import time


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self):
        left = int(self.headers.get("Content-Length", "0"))
        total = 0
        while left > 0:
            data = self.rfile.read(min(left, 1 << 16))
            if not data:
                break
            total += len(data)
            left -= len(data)
        time.sleep(random.uniform(0.0, 0.004))
        body = ("%s %d\n" % (self.path, total)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = answer
    do_POST = answer


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 128


if __name__ == "__main__":
    srv = Server(("127.0.0.1", 0), Handler)
    print("PORT %d" % srv.server_address[1], flush=True)
    srv.serve_forever()
